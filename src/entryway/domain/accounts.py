"""Dashboard accounts: who may sign in, how a password must look, how long a session lasts,
and who may do what in a project. Pure rules, no storage. (Repeated sign-in attempts are
throttled per client address, never by locking an account: `dashboard.sign_in_guard`.)"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from enum import StrEnum

MIN_PASSWORD_LENGTH = 10
MAX_PASSWORD_LENGTH = 1024  # argon2 takes any length; this bounds the work one request asks
MAX_EMAIL_LENGTH = 320
SESSION_IDLE = timedelta(days=7)  # a session unused this long ends
SESSION_LIFETIME = timedelta(days=30)  # and any session ends this long after sign-in

# Printable characters only: a control character (NUL above all) has no place in an address,
# and PostgreSQL's text refuses NUL outright.
_PART = r"[^@\s\x00-\x1f\x7f]"
_EMAIL = re.compile(rf"{_PART}{{1,64}}@{_PART}+\.{_PART}+")


class AccountError(ValueError):
    """A sign-up, sign-in or membership request the rules refuse; the message is for the
    person who asked."""


class ProjectRole(StrEnum):
    OWNER = "owner"  # everything, members and billing included
    MEMBER = "member"  # everything but members and the project's deletion


def normalized_email(email: str) -> str:
    """The address as accounts are keyed: trimmed, lower case, checked for shape."""
    address = email.strip().lower()
    if len(address) > MAX_EMAIL_LENGTH or not _EMAIL.fullmatch(address):
        raise AccountError("Enter a valid email address.")
    return address


def check_password(password: str, email: str) -> None:
    if len(password) < MIN_PASSWORD_LENGTH:
        raise AccountError(f"Choose a password of at least {MIN_PASSWORD_LENGTH} characters.")
    if len(password) > MAX_PASSWORD_LENGTH:
        raise AccountError(f"Choose a password of at most {MAX_PASSWORD_LENGTH} characters.")
    if password.strip().lower() == email.strip().lower():
        raise AccountError("Choose a password other than your email address.")


def session_expiry(created_at: datetime, last_seen_at: datetime) -> datetime:
    return min(created_at + SESSION_LIFETIME, last_seen_at + SESSION_IDLE)
