"""The observability settings (docs/operations.md, "Configuration"): the metrics token, the
readiness thresholds and the log set-up, from the file and from ENTRYWAY_* variables, each
problem named by its key, and what the processes build from them."""

from __future__ import annotations

import io
import json
import logging
import os
from collections.abc import Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from entryway.composition.serving import configure_process_logging, http_app, readiness_settings
from entryway.observability.logs import configure_logging
from entryway.service.readiness_checks import ReadinessSettings
from entryway.service.services import Services
from entryway.settings import SettingsError, load_settings

TOKEN = "scrape-token-never-shown"


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("ENTRYWAY_") and name != "ENTRYWAY_ANVIL":
            monkeypatch.delenv(name)


@pytest.fixture
def root_logging() -> Iterator[None]:
    """Whatever a test configures, the root logger is as it was afterwards."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "entryway.toml"
    path.write_text(text)
    return path


def problems(path: Path | None = None) -> list[str]:
    with pytest.raises(SettingsError) as caught:
        load_settings(path)
    return caught.value.problems


def test_the_keys_come_from_the_file(tmp_path: Path) -> None:
    settings = load_settings(
        write(
            tmp_path,
            f'metrics_token = "{TOKEN}"\n'
            "[readiness]\nexecutor_min_wei = 5\ndeposit_min_wei = 0\n"
            '[log]\nformat = "console"\nlevel = "debug"\n',
        )
    )
    assert settings.metrics_token is not None
    assert settings.metrics_token.get_secret_value() == TOKEN
    assert TOKEN not in repr(settings) and TOKEN not in str(settings.model_dump())
    assert readiness_settings(settings) == ReadinessSettings(executor_min_wei=5, deposit_min_wei=0)
    assert (settings.log.format, settings.log.level, settings.log.json_lines) == (
        "console",
        "DEBUG",
        False,
    )


def test_the_defaults_are_those_documented() -> None:
    settings = load_settings(None)
    assert settings.metrics_token is None
    assert readiness_settings(settings) == ReadinessSettings(
        executor_min_wei=10**16, deposit_min_wei=None
    )
    assert settings.log.json_lines is None  # decided by whether stderr is a terminal
    assert settings.log.level == "INFO"


def test_variables_override_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, '[readiness]\nexecutor_min_wei = 5\n[log]\nformat = "console"\n')
    monkeypatch.setenv("ENTRYWAY_METRICS_TOKEN", TOKEN)
    monkeypatch.setenv("ENTRYWAY_READINESS__EXECUTOR_MIN_WEI", "7")
    monkeypatch.setenv("ENTRYWAY_READINESS__DEPOSIT_MIN_WEI", str(10**18))
    monkeypatch.setenv("ENTRYWAY_LOG__FORMAT", "json")
    monkeypatch.setenv("ENTRYWAY_LOG__LEVEL", "warning")
    settings = load_settings(path)
    assert settings.metrics_token is not None
    assert settings.metrics_token.get_secret_value() == TOKEN
    assert readiness_settings(settings) == ReadinessSettings(
        executor_min_wei=7, deposit_min_wei=10**18
    )
    assert (settings.log.json_lines, settings.log.level) == (True, "WARNING")


def test_bad_values_are_named_by_their_key(tmp_path: Path) -> None:
    found = problems(
        write(
            tmp_path,
            'metrics_token = " "\n[readiness]\nexecutor_min_wei = -1\n'
            'deposit_min_wei = "lots"\n[log]\nformat = "xml"\nlevel = "loud"\nsize = 1\n',
        )
    )
    keys = sorted(p.split(":")[0] for p in found)
    assert keys == [
        "log.format",
        "log.level",
        "log.size",
        "metrics_token",
        "readiness.deposit_min_wei",
        "readiness.executor_min_wei",
    ], found
    assert "log.level: not a log level: give one of DEBUG, INFO" in "\n".join(found)


def test_a_bad_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENTRYWAY_LOG__LEVEL", "chatty")
    monkeypatch.setenv("ENTRYWAY_READINESS__EXECUTOR_MIN_WEI", "a lot")
    monkeypatch.setenv("ENTRYWAY_METRICS_TOKEN", "")
    found = problems()
    assert any(
        p.startswith("log.level: ") and p.endswith("(from ENTRYWAY_LOG__LEVEL)") for p in found
    ), found
    assert any(
        p.startswith("readiness.executor_min_wei: ")
        and p.endswith("(from ENTRYWAY_READINESS__EXECUTOR_MIN_WEI)")
        for p in found
    ), found
    assert any(p.startswith("metrics_token: empty") for p in found), found


async def test_the_app_takes_the_metrics_token(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, f'metrics_token = "{TOKEN}"\n'))

    @asynccontextmanager
    async def lifespan(_: FastAPI):  # type: ignore[no-untyped-def]
        yield

    app = http_app(settings, Services(), lifespan)
    proxied = {"X-Forwarded-For": "203.0.113.9"}  # through a proxy: not this host
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        assert (await client.get("/metrics", headers=proxied)).status_code == 401
        wrong = {**proxied, "Authorization": "Bearer not-the-token"}
        assert (await client.get("/metrics", headers=wrong)).status_code == 401
        right = {**proxied, "Authorization": f"Bearer {TOKEN}"}
        scraped = await client.get("/metrics", headers=right)
    assert scraped.status_code == 200
    assert "entryway_http_requests_total" in scraped.text


def test_the_log_settings_set_format_and_level(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, root_logging: None
) -> None:
    monkeypatch.setenv("ENTRYWAY_LOG__FORMAT", "json")
    monkeypatch.setenv("ENTRYWAY_LOG__LEVEL", "WARNING")
    out = io.StringIO()
    monkeypatch.setattr("sys.stderr", out)
    configure_process_logging(load_settings(None))
    log = logging.getLogger("entryway.test")
    log.info("not written at WARNING")
    log.warning("written with metrics_token=%s", "Bearer abcdef")
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(line["level"], line["logger"]) for line in lines] == [("warning", "entryway.test")]
    assert "abcdef" not in lines[0]["event"]


def test_without_a_format_a_terminal_gets_text(root_logging: None) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for stream, is_json in ((Terminal(), False), (io.StringIO(), True)):
        configure_logging(None, "INFO", stream=stream)
        logging.getLogger("entryway.test").info("hello")
        line = stream.getvalue().strip()
        assert line.startswith("{") is is_json, line
