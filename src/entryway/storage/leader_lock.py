"""Leader election for a chain's bundler: a PostgreSQL advisory lock, or a lease row on SQLite.

One active bundler per (chain id, executor key set): two leaders with the same keys would
race for the same executor nonces.

PostgreSQL: `pg_try_advisory_lock` on a connection of its own, kept open while leading; it
is a session lock, so it is released when that connection ends — by `release`, or by the
server noticing the process died (a SIGKILL closes the socket). A standby calls
`try_acquire` every poll until it wins.

SQLite (any other database): a row of `leader_leases` names the holder and when its lease
expires (LEASE_S after it was last renewed). The leader renews it while it leads (at most
every LEASE_S / 3, from `still_held`) and answers False from `still_held` once it cannot
vouch for it any more, so it stops before the lease could have passed to another. A standby
takes the row when the lease has expired, or at once when its holder is a process of this
host that no longer runs (a leader killed and started again leads again without waiting out
its old lease). Two processes on one data directory therefore never both lead.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import socket
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from sqlalchemy import ColumnElement, and_, delete, insert, select, text, update
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from entryway.storage.schema import leader_leases
from entryway.storage.tasks import as_utc

LEASE_S = 10.0


def leader_key(chain_id: int, executors: Iterable[str]) -> int:
    """The advisory lock key: a signed 64-bit digest of the chain id and the sorted,
    lower-cased executor addresses (the same set in any order is the same leader)."""
    names = ",".join(sorted(address.lower() for address in executors))
    digest = hashlib.sha256(f"entryway-bundler:{chain_id}:{names}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def this_process() -> str:
    """A lease holder's name: this host and process, and a nonce (one process may hold the
    lease again later, under another name)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def holder_is_gone(holder: str) -> bool:
    """Whether `holder` names a process of this host that has exited (a reaped one: a
    zombie still counts as running until its parent waits for it)."""
    host, _, rest = holder.partition(":")
    pid_text, _, _ = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return False  # this process: its own earlier lease, released on the way out
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # running, as another user
    return False


class LeaderLock:
    def __init__(
        self, engine: AsyncEngine, key: int, *, lease_s: float = LEASE_S, holder: str = ""
    ) -> None:
        self.engine = engine
        self.key = key
        self.lease_s = lease_s
        self.holder = holder or this_process()
        self._connection: AsyncConnection | None = None
        self._held = False
        self._renewed_at = 0.0  # monotonic seconds when the lease was last written

    @property
    def leased(self) -> bool:
        """Elected by the lease row (every database but PostgreSQL)."""
        return self.engine.dialect.name != "postgresql"

    async def try_acquire(self) -> bool:
        """Take the lock if nobody holds it; True while it is ours."""
        if self.leased:
            return await self._take_lease()
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
        """Whether the lock is still ours: its connection alive (PostgreSQL), its lease
        renewed in time (SQLite)."""
        if self.leased:
            return await self._lease_held()
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
        if self.leased:
            if self._held:
                with contextlib.suppress(DBAPIError, OperationalError):
                    async with self.engine.begin() as db:
                        await db.execute(delete(leader_leases).where(self._ours()))
            self._held = False
            return
        if self._connection is not None and self._held:
            with contextlib.suppress(DBAPIError, OperationalError):
                await self._connection.scalar(
                    text("SELECT pg_advisory_unlock(:key)"), {"key": self.key}
                )
                await self._connection.commit()
        await self._drop()

    async def _take_lease(self) -> bool:
        if self._held:
            return await self._lease_held()
        started = time.monotonic()
        now = datetime.now(UTC)
        expires = now + timedelta(seconds=self.lease_s)
        key = str(self.key)
        try:
            async with self.engine.begin() as db:
                row = (
                    await db.execute(
                        select(leader_leases.c.holder, leader_leases.c.expires_at).where(
                            leader_leases.c.lease_key == key
                        )
                    )
                ).first()
                if row is None:
                    await db.execute(
                        insert(leader_leases).values(
                            lease_key=key, holder=self.holder, expires_at=expires
                        )
                    )
                    won = True
                elif as_utc(row.expires_at) <= now or holder_is_gone(row.holder):
                    # Compare and set: of two standbys, the one that updates the row first
                    # wins; the other finds the holder changed.
                    taken = await db.execute(
                        update(leader_leases)
                        .where(leader_leases.c.lease_key == key)
                        .where(leader_leases.c.holder == row.holder)
                        .values(holder=self.holder, expires_at=expires)
                    )
                    won = taken.rowcount == 1
                else:
                    won = False
        except (DBAPIError, OperationalError, OSError):
            return False  # the database busy or away: as for a lease held by another
        if won:
            self._held, self._renewed_at = True, started
        return won

    async def _lease_held(self) -> bool:
        if not self._held:
            return False
        since = time.monotonic() - self._renewed_at
        if since < self.lease_s / 3:
            return True
        started = time.monotonic()
        expires = datetime.now(UTC) + timedelta(seconds=self.lease_s)
        try:
            async with self.engine.begin() as db:
                renewed = await db.execute(
                    update(leader_leases).where(self._ours()).values(expires_at=expires)
                )
        except (DBAPIError, OperationalError, OSError):
            # Not renewed this time: still ours while well inside the lease last written.
            self._held = since < self.lease_s * 2 / 3
            return self._held
        self._held = renewed.rowcount == 1  # 0: another took it after it expired
        if self._held:
            self._renewed_at = started
        return self._held

    def _ours(self) -> ColumnElement[bool]:
        return and_(
            leader_leases.c.lease_key == str(self.key),
            leader_leases.c.holder == self.holder,
        )

    async def _drop(self) -> None:
        self._held = False
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(DBAPIError, OperationalError, OSError):
                await connection.close()
