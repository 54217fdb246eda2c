"""The dashboard's settings: the public address its links start with, the sign-in limits and
the support levels' response targets, read from the file and the environment and checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from entryway.composition.serving import dashboard_options, public_url
from entryway.dashboard.sign_in_guard import SignInLimits
from entryway.domain.plans import SupportLevel
from entryway.domain.support import ResponseTargets
from entryway.domain.throttle import Rate
from entryway.settings import SettingsError, load_settings


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "entryway.toml"
    path.write_text(text)
    return path


def test_links_start_with_the_public_url_when_it_is_set(tmp_path: Path) -> None:
    text = '[http]\nhost = "0.0.0.0"\nport = 8080\npublic_url = "https://aa.example.com/"\n'
    settings = load_settings(write(tmp_path, text))
    assert public_url(settings) == "https://aa.example.com"
    assert dashboard_options(settings).public_url == "https://aa.example.com"


def test_without_one_links_start_with_the_address_served_on(tmp_path: Path) -> None:
    assert public_url(load_settings(write(tmp_path, "[http]\nport = 8123\n"))) == (
        "http://127.0.0.1:8123"
    )
    every = load_settings(write(tmp_path, '[http]\nhost = "0.0.0.0"\nport = 9000\n'))
    assert public_url(every) == "http://127.0.0.1:9000"
    six = load_settings(write(tmp_path, '[http]\nhost = "::1"\nport = 9000\n'))
    assert public_url(six) == "http://[::1]:9000"


def test_the_public_url_comes_from_the_environment_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENTRYWAY_HTTP__PUBLIC_URL", "https://console.example.org/aa")
    assert public_url(load_settings(write(tmp_path, ""))) == "https://console.example.org/aa"


@pytest.mark.parametrize(
    "given", ["aa.example.com", "ftp://aa.example.com", "https://", "https://a.example?x=1"]
)
def test_a_public_url_that_is_no_http_address_is_refused(tmp_path: Path, given: str) -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings(write(tmp_path, f'[http]\npublic_url = "{given}"\n'))
    assert refused.value.problems[0].startswith("http.public_url: ")


def test_the_sign_in_limits_have_defaults_and_can_be_set(tmp_path: Path) -> None:
    defaults = dashboard_options(load_settings(write(tmp_path, ""))).sign_in
    assert defaults.per_address == Rate(20, 60)
    assert defaults.per_account == Rate(5, 900)
    assert defaults.operator_per_address == Rate(5, 60)
    assert (defaults.hashing_threads, defaults.hashing_queue) == (1, 8)
    assert defaults == SignInLimits()  # the settings' defaults are the code's
    text = (
        '[dashboard]\nsign_in_per_address = "100/hour"\nsign_in_per_account = "3/minute"\n'
        'operator_sign_in_per_address = "2/30 seconds"\npassword_hashing_threads = 2\n'
        "password_hashing_queue = 0\n"
    )
    given = dashboard_options(load_settings(write(tmp_path, text))).sign_in
    assert given.per_address == Rate(100, 3600)
    assert given.per_account == Rate(3, 60)
    assert given.operator_per_address == Rate(2, 30)
    assert (given.hashing_threads, given.hashing_queue) == (2, 0)


def test_a_sign_in_limit_that_is_no_rate_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings(write(tmp_path, '[dashboard]\nsign_in_per_address = "lots"\n'))
    assert refused.value.problems[0].startswith("dashboard.sign_in_per_address: ")


def test_support_response_targets_have_defaults_and_can_be_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert load_settings(write(tmp_path, "")).support.targets() == ResponseTargets(72, 24, 4)
    text = "[support]\ncommunity_response_hours = 120\npriority_response_hours = 8\n"
    monkeypatch.setenv("ENTRYWAY_SUPPORT__SLA_RESPONSE_HOURS", "1")
    targets = load_settings(write(tmp_path, text)).support.targets()
    assert targets.hours(SupportLevel.COMMUNITY) == 120
    assert targets.hours(SupportLevel.PRIORITY) == 8
    assert targets.hours(SupportLevel.SLA) == 1


@pytest.mark.parametrize("hours", ["0", "-4", "8761", "1.5"])
def test_a_response_target_is_a_whole_number_of_hours_up_to_a_year(
    tmp_path: Path, hours: str
) -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings(write(tmp_path, f"[support]\nsla_response_hours = {hours}\n"))
    assert refused.value.problems[0].startswith("support.sla_response_hours: ")
