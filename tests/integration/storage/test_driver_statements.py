"""The hottest statements run by asyncpg itself on a connection of the engine's pool
(`storage.driver`): the same rows as through SQLAlchemy, a connection the server dropped
fails as a database outage and is replaced, and a refused constraint is SQLAlchemy's
IntegrityError, as callers of the engine expect."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import Integer, bindparam, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.storage import driver
from entryway.storage.outage import database_unavailable
from tests.integration.storage.test_idle_ping import backend, terminate

PID = driver.DriverStatement.of(select(text("pg_backend_pid() AS pid")))
pytestmark = pytest.mark.parametrize("engine", ["postgresql"], indirect=True)  # asyncpg's


async def test_a_statement_is_compiled_once_with_its_parameters_by_name(
    engine: AsyncEngine,
) -> None:
    """Parameters are given by name at each run; a literal of the statement goes along."""
    doubled = driver.DriverStatement.of(select((bindparam("n", type_=Integer) * 2).label("twice")))
    assert doubled.names[0] == "n" and len(doubled.names) == 2  # n, and the literal 2
    assert [r["twice"] for r in await driver.fetch(engine, doubled, {"n": 21})] == [42]
    assert [r["twice"] for r in await driver.fetch(engine, doubled, {"n": 5})] == [10]


async def test_a_connection_dropped_by_the_server_fails_as_an_outage_and_is_replaced(
    engine: AsyncEngine,
) -> None:
    (row,) = await driver.fetch(engine, PID, {})
    assert row["pid"] == await backend(engine)  # a connection of the engine's own pool
    await terminate(row["pid"])
    with pytest.raises(Exception) as caught:  # whichever the driver raises
        await driver.fetch(engine, PID, {})
    assert database_unavailable(caught.value), repr(caught.value)
    (again,) = await driver.fetch(engine, PID, {})
    assert again["pid"] != row["pid"]


async def test_a_refused_constraint_is_sqlalchemys_integrity_error(engine: AsyncEngine) -> None:
    async with engine.begin() as db:
        await db.execute(text("CREATE TABLE once (k INTEGER PRIMARY KEY)"))
    insert = driver.DriverStatement.of(
        text("INSERT INTO once (k) VALUES (:k) RETURNING k").bindparams(
            bindparam("k", type_=Integer)
        )
    )
    assert [r["k"] for r in await driver.fetch(engine, insert, {"k": 1})] == [1]
    with pytest.raises(IntegrityError):
        await driver.fetch(engine, insert, {"k": 1})


async def test_a_statement_cancelled_midway_leaves_no_connection_half_used(
    engine: AsyncEngine,
) -> None:
    """A caller that goes away while its statement runs (a client gone, a deadline): the
    connection, left in the middle of the statement, is discarded, never handed to the next
    caller."""
    sleep = driver.DriverStatement.of(select(text("pg_sleep(5)")))
    (row,) = await driver.fetch(engine, PID, {})
    running = asyncio.create_task(driver.fetch(engine, sleep, {}))
    await asyncio.sleep(0.3)
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    (again,) = await driver.fetch(engine, PID, {})  # a sound connection, at once
    assert again["pid"] != row["pid"]


async def test_a_connection_is_given_back_without_a_task_of_its_own(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLAlchemy gives a connection back from a task of its own; in a busy event loop that
    task costs the caller turns of the loop. Nothing to roll back: given back at once."""
    tasks: list[object] = []
    create_task = asyncio.create_task

    def counted(coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        tasks.append(coro)
        return create_task(coro, **kwargs)

    before = engine.pool.checkedout()  # type: ignore[attr-defined]
    async with driver.connected(engine) as db:
        await driver.fetch_on(db, PID, {})
        monkeypatch.setattr(asyncio, "create_task", counted)
    assert tasks == []
    async with driver.connected(engine) as db:
        await db.execution_options(isolation_level="AUTOCOMMIT")
        await db.execute(text("SELECT 1"))
    assert tasks == []
    assert engine.pool.checkedout() == before  # type: ignore[attr-defined]


async def test_a_connection_in_a_transaction_is_rolled_back_and_given_back_guarded(
    engine: AsyncEngine,
) -> None:
    async with engine.begin() as db:
        await db.execute(text("CREATE TABLE kept (k INTEGER)"))
    before = engine.pool.checkedout()  # type: ignore[attr-defined]
    async with driver.connected(engine) as db:
        await db.execute(text("INSERT INTO kept (k) VALUES (1)"))  # begins a transaction
    assert engine.pool.checkedout() == before  # type: ignore[attr-defined]
    async with engine.connect() as db:
        assert (await db.execute(text("SELECT count(*) FROM kept"))).scalar() == 0
