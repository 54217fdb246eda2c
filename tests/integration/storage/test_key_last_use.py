"""A key's last use: recorded when it authenticates, at most once a minute per process."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.apikeys import KeyEnvironment
from entryway.storage import apikeys
from entryway.storage.schema import api_keys
from entryway.storage.store import Store
from tests.integration.storage.test_store import project


async def test_authenticating_records_the_last_use_once_a_minute(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(engine, auth_cache_seconds=0)
    pid = await project(store)
    key = await store.issue_key(pid, KeyEnvironment.TEST, [80002], datetime.now(UTC))
    assert (await store.api_keys.key(pid, key.key_id)).last_used_at is None

    before = datetime.now(UTC).replace(microsecond=0)
    await store.authenticate(key.secret)
    first = (await store.api_keys.key(pid, key.key_id)).last_used_at
    assert first is not None and first >= before

    # Within the minute another authentication writes nothing (the row is left as set here).
    marker = datetime(2026, 1, 1, tzinfo=UTC)
    async with engine.begin() as db:
        await db.execute(update(api_keys).values(last_used_at=marker))
    await store.authenticate(key.secret)
    assert (await store.api_keys.key(pid, key.key_id)).last_used_at == marker

    # A minute later (as this process counts), it is written again.
    monkeypatch.setattr(apikeys, "LAST_USE_EVERY_S", 0.0)
    await store.authenticate(key.secret)
    again = (await store.api_keys.key(pid, key.key_id)).last_used_at
    assert again is not None and again > marker


async def test_requests_in_flight_when_a_key_is_not_cached_read_it_once(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key's cache entry expiring under load costs one read, not one per request in
    flight."""
    store = Store(engine, auth_cache_seconds=0)
    pid = await project(store)
    first = await store.issue_key(pid, KeyEnvironment.TEST, [80002], datetime.now(UTC))
    keys = store.api_keys
    reads: list[str] = []
    read = keys._authenticate

    async def counted(secret: str) -> object:
        reads.append(secret)
        return await read(secret)

    monkeypatch.setattr(keys, "_authenticate", counted)
    callers = await asyncio.gather(*(store.authenticate(first.secret) for _ in range(20)))
    assert len(reads) == 1
    assert {c.key_id for c in callers} == {first.key_id}
