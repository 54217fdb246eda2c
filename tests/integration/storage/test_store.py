"""Keys, projects and the credit ledger in a real database (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.apikeys import InvalidApiKeyError, KeyEnvironment
from entryway.domain.credits import CreditLot, LotKind
from entryway.domain.plans import PlanName
from entryway.storage.engine import migrate
from entryway.storage.schema import usage_events
from entryway.storage.store import Store

NOW = datetime(2026, 11, 21, 12, tzinfo=UTC)


async def project(store: Store, plan: PlanName = PlanName.FREE) -> str:
    owner = await store.create_user(
        f"{plan.value.lower()}-{id(store)}-{NOW.timestamp()}@example.org", NOW
    )
    return await store.create_project(owner, "demo", plan, [80002, 84532], NOW, grant=0)


async def test_migrations_are_idempotent(engine: AsyncEngine) -> None:
    await migrate(engine)  # a second run finds the schema at head


async def test_keys_authenticate_only_while_valid(engine: AsyncEngine) -> None:
    store = Store(engine)
    pid = await project(store)
    key = await store.issue_key(pid, KeyEnvironment.TEST, [80002], NOW)
    caller = await store.authenticate(key.secret)
    assert (caller.project_id, caller.key_chains, caller.project_chains) == (
        pid,
        frozenset({80002}),
        frozenset({80002, 84532}),
    )
    assert caller.plan is PlanName.FREE and caller.aa_module_enabled
    forged = key.secret[:-4] + ("AAAA" if not key.secret.endswith("AAAA") else "BBBB")
    with pytest.raises(InvalidApiKeyError):
        await store.authenticate(forged)
    await store.revoke_key(key.key_id, NOW)
    with pytest.raises(InvalidApiKeyError):
        await store.authenticate(key.secret)


async def test_usage_draws_fifo_records_overage_and_charges_once(engine: AsyncEngine) -> None:
    store = Store(engine)
    pid = await project(store, PlanName.STARTER)
    await store.add_lot(
        pid, CreditLot.new(f"{pid}-jan", LotKind.GRANT, 100, NOW - timedelta(days=40))
    )
    await store.add_lot(
        pid, CreditLot.new(f"{pid}-feb", LotKind.GRANT, 100, NOW - timedelta(days=10))
    )

    first = await store.record_usage(pid, "op-1", "sponsored_user_operation", 150, NOW)
    again = await store.record_usage(pid, "op-1", "sponsored_user_operation", 150, NOW)
    assert (first.overage, first.duplicate) == (0, False)
    assert again == type(again)(first.event_id, 150, 0, True)
    account = await store.credit_account(pid)
    assert [(lot.lot_id.split("-")[-1], lot.remaining) for lot in account.lots] == [
        ("jan", 0),
        ("feb", 50),
    ]

    over = await store.record_usage(pid, "op-2", "notarization", 80, NOW)
    assert over.overage == 30
    assert (await store.credit_account(pid)).balance(NOW) == 0


async def test_concurrent_retries_of_one_event_charge_once(engine: AsyncEngine) -> None:
    store = Store(engine)
    pid = await project(store)
    await store.add_lot(pid, CreditLot.new(f"{pid}-lot", LotKind.GRANT, 1_000, NOW))
    results = await asyncio.gather(
        *(store.record_usage(pid, "same", "read", 10, NOW) for _ in range(5)),
        return_exceptions=True,
    )
    assert all(not isinstance(r, BaseException) for r in results), results
    assert (await store.credit_account(pid)).balance(NOW) == 990
    async with engine.connect() as db:
        count = await db.scalar(
            select(func.count()).select_from(usage_events).where(usage_events.c.project_id == pid)
        )
    assert count == 1


async def test_the_migrations_build_exactly_the_schema_the_code_uses(engine: AsyncEngine) -> None:
    """schema.py and the migrations describe the same tables twice, on purpose (a migration
    must not change when the code does); this holds them together."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from entryway.storage.schema import metadata

    def diff(connection: object) -> list[object]:
        return list(compare_metadata(MigrationContext.configure(connection), metadata))

    async with engine.connect() as db:
        assert await db.run_sync(diff) == []
