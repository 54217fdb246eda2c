"""Password hashing with argon2id (argon2-cffi's defaults, RFC 9106's second recommended
parameter set), bounded: a hash takes tens of milliseconds of a core, so a burst of sign-ins
would otherwise take every core from the service's other clients. `PasswordWork` runs at most
`threads` hashes at once, off the event loop, lets at most `queue` more wait, and refuses the
rest at once (`PasswordWorkBusyError`, answered 429) without hashing."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from entryway.errors import EntrywayError

_T = TypeVar("_T")
_hasher = PasswordHasher()
# Verified against when no user has the email, so that a sign-in costs as much, and takes
# as long, whether the account exists or not.
_NOBODY = _hasher.hash("no account has this password")


class PasswordWorkBusyError(EntrywayError):
    """Every hashing thread is busy and the queue is full: ask again in a second."""


def _verify(password_hash: str | None, password: str) -> bool:
    try:
        return _hasher.verify(password_hash or _NOBODY, password) and bool(password_hash)
    except (VerificationError, InvalidHashError):
        return False


class PasswordWork:
    def __init__(self, threads: int = 1, queue: int = 8) -> None:
        if threads < 1 or queue < 0:
            raise ValueError("password hashing needs a thread and a queue of zero or more")
        self.threads = threads
        self.queue = queue
        self._slots = asyncio.Semaphore(threads)
        self._admitted = 0  # hashing now or waiting for a thread
        self.hashed = 0  # hashes and verifications done: what the bound is tested by

    @property
    def admitted(self) -> int:
        return self._admitted

    async def hash(self, password: str) -> str:
        return await self._run(lambda: _hasher.hash(password))

    async def verify(self, password_hash: str | None, password: str) -> bool:
        """Whether `password` matches; with no hash (no such account) the same work is done
        against a hash nobody's password matches, and the answer is False."""
        return await self._run(lambda: _verify(password_hash, password))

    async def _run(self, work: Callable[[], _T]) -> _T:
        if self._admitted >= self.threads + self.queue:
            raise PasswordWorkBusyError("too many passwords are being checked right now")
        self._admitted += 1
        try:
            async with self._slots:
                self.hashed += 1
                job = asyncio.ensure_future(asyncio.to_thread(work))
                try:
                    return await asyncio.shield(job)
                except asyncio.CancelledError:
                    # The thread cannot be stopped: its slot stays taken until it is done,
                    # so that abandoned requests never add hashes beyond the bound.
                    await asyncio.wait([job])
                    raise
        finally:
            self._admitted -= 1


async def hash_password(password: str) -> str:
    """One hash off the event loop, outside any bound (for tools, not for requests)."""
    return await asyncio.to_thread(_hasher.hash, password)


async def verify_password(password_hash: str | None, password: str) -> bool:
    """One verification off the event loop, outside any bound (for tools, not requests)."""
    return await asyncio.to_thread(_verify, password_hash, password)
