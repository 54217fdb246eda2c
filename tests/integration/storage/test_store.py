"""Keys, projects and the credit ledger in a real database (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from alembic import command
from sqlalchemy import func, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.apikeys import InvalidApiKeyError, KeyEnvironment, KeyRole
from entryway.domain.credits import CreditLot, LotKind
from entryway.domain.plans import PlanName
from entryway.storage.apikeys import LastAdminKeyError, UnknownKeyError
from entryway.storage.engine import alembic_config, make_engine, migrate
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


async def test_a_project_keeps_an_active_admin_key(engine: AsyncEngine) -> None:
    store = Store(engine)
    pid = await project(store)
    first = await store.issue_key(pid, KeyEnvironment.TEST, [80002], NOW, role=KeyRole.ADMIN)
    app = await store.issue_key(pid, KeyEnvironment.TEST, [80002], NOW)
    assert {k.key_id: k.role for k in await store.keys(pid)} == {
        first.key_id: KeyRole.ADMIN,
        app.key_id: KeyRole.SERVICE,  # the default
    }
    assert (await store.authenticate(first.secret)).role is KeyRole.ADMIN
    with pytest.raises(LastAdminKeyError):
        await store.revoke_key(first.key_id, NOW, project_id=pid)
    with pytest.raises(LastAdminKeyError):
        await store.api_keys.change(pid, first.key_id, role=KeyRole.SERVICE)
    await store.revoke_key(app.key_id, NOW, project_id=pid)  # a service key goes freely
    await store.revoke_key(app.key_id, NOW, project_id=pid)  # again: nothing to do
    with pytest.raises(UnknownKeyError):
        await store.revoke_key("00000000", NOW, project_id=pid)

    promoted = await store.issue_key(pid, KeyEnvironment.TEST, [80002], NOW)
    changed = await store.api_keys.change(pid, promoted.key_id, role=KeyRole.ADMIN)
    assert changed.role is KeyRole.ADMIN
    await store.revoke_key(first.key_id, NOW, project_id=pid)  # `promoted` remains
    assert [k.key_id for k in await store.keys(pid) if k.revoked_at is None] == [promoted.key_id]


async def test_concurrent_revocations_and_demotions_leave_one_admin(engine: AsyncEngine) -> None:
    """Two connections (two engines: on SQLite, two writers on one file) race to remove the
    project's last two admin keys: one wins, the other is refused, never both."""
    second = make_engine(engine.url.render_as_string(hide_password=False))
    stores = Store(engine, auth_cache_seconds=0), Store(second, auth_cache_seconds=0)
    try:
        for race, demote in enumerate((False, True, False, True)):
            owner = await stores[0].create_user(f"race-{race}@example.org", NOW)
            pid = await stores[0].create_project(owner, "race", PlanName.FREE, [80002], NOW)
            a, b = [
                await stores[0].issue_key(
                    pid, KeyEnvironment.TEST, [80002], NOW, role=KeyRole.ADMIN
                )
                for _ in range(2)
            ]
            results = await asyncio.gather(
                _remove(stores[0], pid, a.key_id, demote=demote),
                _remove(stores[1], pid, b.key_id, demote=demote),
                return_exceptions=True,
            )
            assert sorted(type(r).__name__ for r in results) == ["LastAdminKeyError", "NoneType"]
            admins = [
                k
                for k in await stores[0].keys(pid)
                if k.role is KeyRole.ADMIN and k.revoked_at is None
            ]
            assert len(admins) == 1
    finally:
        await second.dispose()


async def _remove(store: Store, project_id: str, key_id: str, *, demote: bool) -> None:
    if demote:
        await store.api_keys.change(project_id, key_id, role=KeyRole.SERVICE)
    else:
        await store.revoke_key(key_id, NOW, project_id=project_id)


async def test_keys_made_before_roles_become_admin_keys(engine: AsyncEngine) -> None:
    """Before roles any key administered its project: the migration keeps it that way."""
    store = Store(engine)
    pid = await project(store)
    await _alembic(engine, "downgrade", "0006")
    async with engine.begin() as db:
        await db.execute(
            text(
                "INSERT INTO api_keys (key_id, project_id, environment, digest, chains, "
                "created_at) VALUES ('0ld0ld00', :pid, 'test', :digest, '80002', :at)"
            ),
            {"pid": pid, "digest": "0" * 64, "at": NOW},
        )
    await _alembic(engine, "upgrade", "head")
    assert [(k.key_id, k.role) for k in await store.keys(pid)] == [("0ld0ld00", KeyRole.ADMIN)]
    # and the column has no default left: a key is always issued with its role
    with pytest.raises(IntegrityError):
        async with engine.begin() as db:
            await db.execute(
                text(
                    "INSERT INTO api_keys (key_id, project_id, environment, digest, chains, "
                    "created_at) VALUES ('n0r0le00', :pid, 'test', :digest, '80002', :at)"
                ),
                {"pid": pid, "digest": "1" * 64, "at": NOW},
            )


async def _alembic(engine: AsyncEngine, verb: str, revision: str) -> None:
    def run(connection: object) -> None:
        config = alembic_config(str(engine.url))
        config.attributes["connection"] = connection
        getattr(command, verb)(config, revision)

    async with engine.begin() as db:
        await db.run_sync(run)
