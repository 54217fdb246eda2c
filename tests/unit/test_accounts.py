"""The dashboard's account rules: addresses, passwords and how long a session lives."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from entryway.dashboard.passwords import hash_password, verify_password
from entryway.domain.accounts import (
    MAX_PASSWORD_LENGTH,
    MIN_PASSWORD_LENGTH,
    SESSION_IDLE,
    SESSION_LIFETIME,
    AccountError,
    check_password,
    normalized_email,
    session_expiry,
)

NOW = datetime(2026, 11, 24, 9, tzinfo=UTC)


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("Alice@Example.COM", "alice@example.com"),
        ("  bob@example.org \n", "bob@example.org"),
        ("carol+dashboard@mail.example.co.uk", "carol+dashboard@mail.example.co.uk"),
    ],
)
def test_an_address_is_kept_trimmed_and_in_lower_case(given: str, kept: str) -> None:
    assert normalized_email(given) == kept


@pytest.mark.parametrize(
    "given",
    [
        "",
        "alice",
        "alice@",
        "@example.com",
        "alice@example",
        "alice@@example.com",
        "al ice@example.com",
        "alice@exa mple.com",
        "alice\x00@example.com",
        "alice@example.com\x00",
        "ali\x7fce@example.com",
        "a" * 65 + "@example.com",
        "alice@" + "e" * 320 + ".com",
    ],
)
def test_an_address_of_the_wrong_shape_is_refused(given: str) -> None:
    with pytest.raises(AccountError, match="valid email"):
        normalized_email(given)


def test_a_password_must_be_long_enough_but_not_unbounded() -> None:
    check_password("x" * MIN_PASSWORD_LENGTH, "alice@example.com")
    check_password("x" * MAX_PASSWORD_LENGTH, "alice@example.com")
    with pytest.raises(AccountError, match="at least 10"):
        check_password("x" * (MIN_PASSWORD_LENGTH - 1), "alice@example.com")
    with pytest.raises(AccountError, match="at most 1024"):
        check_password("x" * (MAX_PASSWORD_LENGTH + 1), "alice@example.com")


def test_a_password_may_not_be_the_email_address() -> None:
    with pytest.raises(AccountError, match="other than your email"):
        check_password(" Alice@Example.com", "alice@example.com")


def test_a_session_ends_when_idle_or_at_the_latest_after_its_lifetime() -> None:
    assert session_expiry(NOW, NOW) == NOW + SESSION_IDLE
    seen = NOW + timedelta(days=3)
    assert session_expiry(NOW, seen) == seen + SESSION_IDLE
    late = NOW + SESSION_LIFETIME - timedelta(days=1)
    assert session_expiry(NOW, late) == NOW + SESSION_LIFETIME


async def test_passwords_are_stored_as_argon2id_and_verified_against_their_hash() -> None:
    hashed = await hash_password("correct horse battery staple")
    assert hashed.startswith("$argon2id$")
    assert "correct horse" not in hashed
    assert await verify_password(hashed, "correct horse battery staple")
    assert not await verify_password(hashed, "correct horse battery stapler")
    assert not await verify_password(None, "no account has this password")
    assert not await verify_password("not a hash", "correct horse battery staple")
