"""Leader election for a chain's bundler: a PostgreSQL session-level advisory lock.

One active bundler per (chain id, executor key set): two leaders with the same keys would
race for the same executor nonces. The lock is taken with `pg_try_advisory_lock` on a
connection of its own, kept open while leading; it is a session lock, so it is released
when that connection ends — by `release`, or by the server noticing the process died (a
SIGKILL closes the socket). A standby calls `try_acquire` every poll until it wins.

On SQLite there is one process by construction (one file, one writer), so the lock is
trivially held: `try_acquire` always wins.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterable

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine


def leader_key(chain_id: int, executors: Iterable[str]) -> int:
    """The advisory lock key: a signed 64-bit digest of the chain id and the sorted,
    lower-cased executor addresses (the same set in any order is the same leader)."""
    names = ",".join(sorted(address.lower() for address in executors))
    digest = hashlib.sha256(f"entryway-bundler:{chain_id}:{names}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class LeaderLock:
    def __init__(self, engine: AsyncEngine, key: int) -> None:
        self.engine = engine
        self.key = key
        self._connection: AsyncConnection | None = None
        self._held = False

    @property
    def trivial(self) -> bool:
        return self.engine.dialect.name != "postgresql"

    async def try_acquire(self) -> bool:
        """Take the lock if nobody holds it; True while it is ours."""
        if self.trivial:
            self._held = True
            return True
        if self._held:
            return await self.still_held()
        try:
            if self._connection is None:
                # A database down or restarting refuses the connection (a bare OSError from
                # the driver): a standby waits for it, as for a held lock.
                self._connection = await self.engine.connect()
            won = await self._connection.scalar(
                text("SELECT pg_try_advisory_lock(:key)"), {"key": self.key}
            )
            await self._connection.commit()  # no transaction left open; the lock stays
        except (DBAPIError, OperationalError, OSError):
            await self._drop()
            return False
        self._held = bool(won)
        return self._held

    async def still_held(self) -> bool:
        """Whether the lock's connection is still alive (the lock dies with it)."""
        if self.trivial:
            return self._held
        if not self._held or self._connection is None:
            return False
        try:
            await self._connection.scalar(text("SELECT 1"))
            await self._connection.commit()
        except (DBAPIError, OperationalError):
            await self._drop()
            return False
        return True

    async def release(self) -> None:
        if self._connection is not None and self._held:
            with contextlib.suppress(DBAPIError, OperationalError):
                await self._connection.scalar(
                    text("SELECT pg_advisory_unlock(:key)"), {"key": self.key}
                )
                await self._connection.commit()
        await self._drop()

    async def _drop(self) -> None:
        self._held = False
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(DBAPIError, OperationalError, OSError):
                await connection.close()
