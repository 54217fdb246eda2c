"""The hottest statements on PostgreSQL, run by the driver (asyncpg) itself.

A statement executed through SQLAlchemy Core costs about 0.4 ms of CPU before and after the
database's own work (the compiled-statement cache's key, the cursor's adaptation, result
rows), some ten times what asyncpg spends on it. For the few statements that run on every
poll or every accepted op, that is most of what the API process spends on them, and in a
burst every millisecond of CPU is one more the next request waits. Those statements are still
written with SQLAlchemy, compiled once for asyncpg (`DriverStatement`), and run on a
connection of the engine's own pool, so the pool's limits, its idle-connection ping and the
outage handling (`outage.database_unavailable`) stay as they are: a connection the driver
found lost (or left in the middle of a statement) is invalidated and the error raised as
SQLAlchemy raises a lost connection's, and a constraint the database refused is raised as
SQLAlchemy's IntegrityError, as callers expect from the engine."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from asyncpg import Record
from asyncpg import exceptions as pg
from sqlalchemy import ClauseElement
from sqlalchemy.dialects.postgresql import asyncpg as asyncpg_dialect
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from entryway.storage.outage import database_unavailable

_DIALECT = asyncpg_dialect.dialect()  # type: ignore[no-untyped-call]


@dataclass(frozen=True, slots=True)
class DriverStatement:
    """A statement in asyncpg's SQL (`$1`...), the names of its parameters in order, and the
    values of those bound in the statement itself (literals)."""

    sql: str
    names: tuple[str, ...]
    bound: Mapping[str, Any]

    @classmethod
    def of(cls, clause: ClauseElement) -> DriverStatement:
        """`clause` compiled once for asyncpg; its parameters are given by name when run."""
        compiled = clause.compile(dialect=_DIALECT)
        names: list[str] = getattr(compiled, "positiontup", None) or []  # SQLCompiler's
        binds: dict[str, Any] = getattr(compiled, "binds", {})
        bound = {k: b.value for k, b in binds.items() if not b.required and b.value is not None}
        return cls(str(compiled), tuple(names), bound)

    def arguments(self, params: Mapping[str, Any]) -> list[Any]:
        return [params[name] if name in params else self.bound[name] for name in self.names]


@contextlib.asynccontextmanager
async def connected(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A connection of `engine`'s pool for statements that are their own transactions (none
    begun, or AUTOCOMMIT), given back to the pool as soon as the block ends.

    SQLAlchemy's own `async with engine.connect()` gives it back from a task of its own, so
    that a cancellation cannot cut the rollback it may need in half. With no transaction
    open there is no rollback to send: the pool takes it back without a round trip. That
    task would cost the caller turns of the event loop (the task's start, then waking the
    caller), each one as long as everything else the loop has ready; in a burst of sends,
    tens of milliseconds. A connection that did begin a transaction is given back the
    guarded way."""
    connection = await engine.connect()
    try:
        yield connection
    finally:
        sync = connection.sync_connection
        options = sync.get_execution_options() if sync is not None else {}
        autocommit = options.get("isolation_level") == "AUTOCOMMIT"
        if autocommit or not connection.in_transaction():
            await connection.close()
        else:
            await connection.__aexit__(None, None, None)  # SQLAlchemy's guarded close


async def fetch(
    engine: AsyncEngine, statement: DriverStatement, params: Mapping[str, Any]
) -> Sequence[Record]:
    """The rows of `statement`, run on its own (no transaction around it)."""
    async with connected(engine) as connection:
        return await fetch_on(connection, statement, params)


async def fetch_on(
    connection: AsyncConnection, statement: DriverStatement, params: Mapping[str, Any]
) -> Sequence[Record]:
    """The rows of `statement`, run on `connection` (in its transaction, if it began one)."""
    pooled = await connection.get_raw_connection()
    driver: Any = pooled.driver_connection
    try:
        rows: Sequence[Record] = await driver.fetch(statement.sql, *statement.arguments(params))
    except pg.IntegrityConstraintViolationError as exc:
        raise IntegrityError(statement.sql, None, exc) from exc
    except pg.PostgresError as exc:
        if not isinstance(exc, pg.PostgresConnectionError) and not database_unavailable(exc):
            raise  # the server refused the statement: the connection is sound
        await _discard(connection)
        raise DBAPIError(statement.sql, None, exc, connection_invalidated=True) from exc
    except BaseException as exc:  # lost, closed, or left mid-statement: never reused
        await _discard(connection)
        if isinstance(exc, Exception):
            raise DBAPIError(statement.sql, None, exc, connection_invalidated=True) from exc
        raise
    return rows


async def _discard(connection: AsyncConnection) -> None:
    """Invalidate the connection, as SQLAlchemy does one its driver found lost: the pool
    replaces it at its next checkout."""
    with contextlib.suppress(Exception):
        await connection.invalidate()
