"""Structured logs: a line logged while a request is handled carries that request's id, in
JSON, through the ordinary `logging` API; secrets in a message are masked on the way out."""

from __future__ import annotations

import io
import json
import logging
import warnings
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import structlog

from entryway.domain.apikeys import KeyEnvironment, issue
from entryway.observability.logs import configure_logging
from entryway.service.app import create_app
from entryway.service.services import Services

log = logging.getLogger("entryway.tests.handler")


@pytest.fixture
def json_lines() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    level = root.level
    out = io.StringIO()
    handler = configure_logging(json=True, level="INFO", stream=out)
    try:
        yield out
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        logging.captureWarnings(False)
        structlog.reset_defaults()


def lines(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]


async def test_a_line_logged_in_a_handler_carries_the_request_id(json_lines: io.StringIO) -> None:
    secret = issue(KeyEnvironment.LIVE).secret
    app = create_app(Services())

    @app.get("/test/logs")
    async def logs() -> dict[str, bool]:
        log.info("handling with key %s", secret)
        return {"ok": True}

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        first = await http.get("/test/logs", headers={"X-Request-Id": "req-log-1"})
        second = await http.get("/test/logs")
    assert first.status_code == second.status_code == 200

    handled = [e for e in lines(json_lines) if e["logger"] == "entryway.tests.handler"]
    assert [e["request_id"] for e in handled] == ["req-log-1", second.headers["X-Request-Id"]]
    assert handled[0]["level"] == "info" and "timestamp" in handled[0]
    assert secret not in json_lines.getvalue()
    assert handled[0]["event"].startswith("handling with key ew_live_")


async def test_outside_a_request_no_request_id_lingers(json_lines: io.StringIO) -> None:
    app = create_app(Services())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        await http.get("/healthz", headers={"X-Request-Id": "req-log-2"})
    log.info("after the request")
    after = [e for e in lines(json_lines) if e["event"] == "after the request"]
    assert len(after) == 1 and "request_id" not in after[0]


async def test_an_unhandled_error_is_one_json_line_naming_the_request(
    json_lines: io.StringIO,
) -> None:
    secret = issue(KeyEnvironment.TEST).secret
    app = create_app(Services())

    @app.get("/test/fails")
    async def fails() -> None:
        raise RuntimeError(f"the code did not expect key {secret}")

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        failed = await http.get("/test/fails", headers={"X-Request-Id": "req-500-json"})
    assert failed.status_code == 500

    errors = [e for e in lines(json_lines) if e["level"] == "error"]
    assert len(errors) == 1, errors
    assert errors[0]["request_id"] == "req-500-json"
    assert "RuntimeError: the code did not expect key ew_test_" in errors[0]["exception"]
    assert secret not in json_lines.getvalue()


def test_a_library_warning_comes_out_as_a_structured_line(json_lines: io.StringIO) -> None:
    # configure_logging routed warnings to logging (pytest records them its own way meanwhile)
    assert logging._warnings_showwarning is not None  # type: ignore[attr-defined]
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = logging_showwarning()  # as configure_logging left it
        warnings.warn("a connection was never checked in", RuntimeWarning, stacklevel=1)
    [line] = [e for e in lines(json_lines) if e["logger"] == "py.warnings"]
    assert line["level"] == "warning"
    assert "RuntimeWarning: a connection was never checked in" in line["event"]


def logging_showwarning() -> Any:
    """The hook `logging.captureWarnings(True)` installs (pytest swaps its own in per test)."""
    return logging._showwarning  # type: ignore[attr-defined]
