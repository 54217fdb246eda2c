"""Password hashing with argon2id (argon2-cffi's defaults, RFC 9106's second recommended
parameter set)."""

from __future__ import annotations

import asyncio

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

_hasher = PasswordHasher()
# Verified against when no user has the email, so that a sign-in takes as long whether the
# account exists or not.
_NOBODY = _hasher.hash("no account has this password")


async def hash_password(password: str) -> str:
    """Hashing takes tens of milliseconds of CPU: off the event loop."""
    return await asyncio.to_thread(_hasher.hash, password)


async def verify_password(password_hash: str | None, password: str) -> bool:
    def verify() -> bool:
        try:
            return _hasher.verify(password_hash or _NOBODY, password) and bool(password_hash)
        except (VerificationError, InvalidHashError):
            return False

    return await asyncio.to_thread(verify)
