"""PostgreSQL connections are pinged before use only after sitting idle
(`engine._ping_if_idle`): a dropped idle connection is replaced unseen, a busy one costs no
round trip, and one dropped while busy fails as a database outage (503 upstream) and the
pool is renewed."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.dialects.postgresql.asyncpg import AsyncAdapt_asyncpg_connection
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.storage import engine as engines
from entryway.storage.outage import database_unavailable
from tests.integration.postgres import ADMIN_URL, fresh_database


@pytest.fixture
async def pg() -> AsyncIterator[AsyncEngine]:
    async with fresh_database("the pool's idle ping") as (url, _):
        eng = engines.make_engine(url)
        yield eng
        await eng.dispose()


async def backend(eng: AsyncEngine) -> int:
    async with eng.connect() as db:
        return int((await db.execute(text("SELECT pg_backend_pid()"))).scalar_one())


async def terminate(pid: int) -> None:
    admin = await asyncpg.connect(ADMIN_URL)
    try:
        assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
    finally:
        await admin.close()


@pytest.fixture
def pings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    seen: list[int] = []
    ping = AsyncAdapt_asyncpg_connection.ping

    def counted(self: AsyncAdapt_asyncpg_connection) -> None:
        seen.append(1)
        ping(self)

    monkeypatch.setattr(AsyncAdapt_asyncpg_connection, "ping", counted)
    return seen


async def test_a_busy_connection_is_used_without_a_ping(pg: AsyncEngine, pings: list[int]) -> None:
    first = await backend(pg)
    assert [await backend(pg) for _ in range(5)] == [first] * 5  # the pooled one, reused
    assert pings == []


async def test_an_idle_connection_dropped_by_the_server_is_replaced_unseen(
    pg: AsyncEngine, pings: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    dropped = await backend(pg)
    await terminate(dropped)
    monkeypatch.setattr(engines, "IDLE_PING_SECONDS", 0.0)  # it has sat idle long enough
    fresh = await backend(pg)
    assert fresh != dropped
    assert pings == [1]


async def test_a_connection_dropped_while_busy_fails_as_an_outage_and_the_pool_renews(
    pg: AsyncEngine, pings: list[int]
) -> None:
    dropped = await backend(pg)
    await terminate(dropped)
    with pytest.raises(Exception) as caught:  # whichever the driver raises
        await backend(pg)
    assert database_unavailable(caught.value), repr(caught.value)
    assert await backend(pg) not in (dropped, None)
    assert pings == []
