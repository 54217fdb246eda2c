"""Batching on SQLite and PostgreSQL, no chain: a batch is sealed when it fills or when its
oldest hash has waited the interval, its leaves are numbered in arrival order, its anchoring
task is queued with it, and concurrent sealers never put one hash in two batches."""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.apikeys import KeyEnvironment
from entryway.domain.notarization import (
    ANCHOR_TASK,
    HASH_BYTES,
    BatchState,
    NewNotarization,
    NotarizationMode,
    NotarySettings,
)
from entryway.domain.plans import PlanName
from entryway.notary.batcher import Batcher, running_batcher
from entryway.storage.notary import NotaryStore
from entryway.storage.schema import notarizations, tasks
from entryway.storage.store import Store

AMOY, BASE_SEPOLIA = 80002, 84532


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 21, 12, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


async def _project(engine: AsyncEngine) -> str:
    store = Store(engine)
    now = datetime.now(UTC)
    owner = await store.create_user(f"{os.urandom(6).hex()}@example.org", now)
    project_id = await store.create_project(owner, "p", PlanName.FREE, [AMOY, BASE_SEPOLIA], now)
    await store.issue_key(project_id, KeyEnvironment.TEST, [AMOY], now)
    return project_id


async def _submit(store: NotaryStore, project_id: str, chain_id: int, clock: Clock) -> str:
    clock.advance(0.001)  # arrival order is creation order
    item = NewNotarization(os.urandom(HASH_BYTES), HASH_BYTES)
    key = os.urandom(8).hex()
    submitted = await store.submit(
        project_id, None, chain_id, NotarizationMode.BATCHED, [item], key, digest=key
    )
    return submitted.notarization_ids[0]


async def _leaves(engine: AsyncEngine, batch_id: str) -> list[tuple[str, int]]:
    async with engine.connect() as db:
        rows = await db.execute(
            select(notarizations.c.notarization_id, notarizations.c.leaf_index)
            .where(notarizations.c.batch_id == batch_id)
            .order_by(notarizations.c.leaf_index)
        )
        return [(r.notarization_id, r.leaf_index) for r in rows]


async def test_batches_are_sealed_when_full_or_when_the_interval_passes(
    engine: AsyncEngine,
) -> None:
    clock = Clock()
    store = NotaryStore(engine, clock=clock)
    project_id = await _project(engine)
    batcher = Batcher(store, [AMOY], NotarySettings(batch_size=3, batch_interval=60), clock=clock)
    ids = [await _submit(store, project_id, AMOY, clock) for _ in range(7)]
    elsewhere = await _submit(store, project_id, BASE_SEPOLIA, clock)

    full = await batcher.tick()
    assert [b.leaf_count for b in full] == [3, 3]
    assert all(b.state is BatchState.SEALED and b.mode is NotarizationMode.BATCHED for b in full)
    assert [await _leaves(engine, b.batch_id) for b in full] == [
        [(ids[0], 0), (ids[1], 1), (ids[2], 2)],
        [(ids[3], 0), (ids[4], 1), (ids[5], 2)],
    ]
    clock.advance(59)
    assert await batcher.tick() == []  # one hash waits, not for long enough yet
    clock.advance(2)
    late = await batcher.tick()
    assert [b.leaf_count for b in late] == [1]
    assert await _leaves(engine, late[0].batch_id) == [(ids[6], 0)]

    async with engine.connect() as db:
        queued = (
            await db.execute(select(tasks.c.payload).where(tasks.c.kind == ANCHOR_TASK))
        ).scalars()
        batch_ids = {p.split('"batchId":"')[1].split('"')[0] for p in queued}
        chain_of_other = await db.scalar(
            select(notarizations.c.batch_id).where(notarizations.c.notarization_id == elsewhere)
        )
    assert batch_ids == {b.batch_id for b in full + late}
    assert chain_of_other is None  # this batcher seals Amoy only
    assert (await store.pending(BASE_SEPOLIA, 10)).count == 1


async def test_concurrent_sealers_never_share_a_hash(engine: AsyncEngine) -> None:
    clock = Clock()
    store = NotaryStore(engine, clock=clock)
    project_id = await _project(engine)
    ids = {await _submit(store, project_id, AMOY, clock) for _ in range(10)}
    batches = await asyncio.gather(*(store.seal(AMOY, 4) for _ in range(4)))
    sealed = [b for b in batches if b is not None]
    members = [[n for n, _ in await _leaves(engine, b.batch_id)] for b in sealed]
    assert sorted(len(m) for m in members) == [2, 4, 4]
    assert {n for m in members for n in m} == ids
    assert sum(len(m) for m in members) == len(ids)
    assert await store.seal(AMOY, 4) is None


async def test_the_running_batcher_seals_in_the_background(engine: AsyncEngine) -> None:
    store = NotaryStore(engine)
    project_id = await _project(engine)
    settings = NotarySettings(batch_size=100, batch_interval=0.05, poll_interval=0.02)
    notarization_id = await _submit(store, project_id, AMOY, Clock())  # long ago: due at once
    async with running_batcher(store, [AMOY], settings):
        for _ in range(100):
            found = await store.get(project_id, notarization_id)
            if found is not None and found.batch is not None:
                break
            await asyncio.sleep(0.02)
    assert found is not None and found.batch is not None and found.leaf_index == 0
