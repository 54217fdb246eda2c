"""Support requests and chain maintenance in a real database (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.plans import PlanName
from entryway.domain.support import RequestStatus, SupportTopic
from entryway.service import maintenance as maintenance_module
from entryway.service.maintenance import CONFIGURED_REASON, ChainMaintenance
from entryway.storage.maintenance import MaintenanceRecords
from entryway.storage.project_directory import every_project
from entryway.storage.store import Store
from entryway.storage.support import AlreadyAnsweredError, SupportRequests

NOW = datetime(2026, 11, 21, 12, tzinfo=UTC)
LATER = NOW + timedelta(hours=1)
NETWORK = {"chain_name": "Gnosis", "mainnet_chain_id": 100, "testnet_chain_id": 10200,
           "use_case": "Payroll"}  # fmt: skip


async def test_users_see_their_own_requests_and_the_operator_answers_once(
    engine: AsyncEngine,
) -> None:
    store = Store(engine)
    alice = await store.create_user("alice@example.com", NOW)
    bob = await store.create_user("bob@example.com", NOW)
    pid = await store.create_project(alice, "Checkout", PlanName.FREE, [80002], NOW)
    requests = SupportRequests(engine)
    asked = await requests.file(alice, pid, SupportTopic.TECHNICAL, "Add Gnosis", NETWORK, NOW)
    await requests.file(bob, None, SupportTopic.BILLING, "Invoice?", None, LATER)

    mine = await requests.of_user(alice)
    assert [(r.request_id, r.project_name, r.details) for r in mine] == [
        (asked, "Checkout", NETWORK)
    ]
    assert mine[0].status is RequestStatus.OPEN and mine[0].answer is None
    assert [r.email for r in await requests.listed(RequestStatus.OPEN)] == [
        "bob@example.com",  # newest first
        "alice@example.com",
    ]

    answered = await requests.answer(asked, "Gnosis is planned for March.", LATER)
    assert answered.status is RequestStatus.ANSWERED and answered.answered_at == LATER
    with pytest.raises(AlreadyAnsweredError):
        await requests.answer(asked, "A second answer", LATER)
    assert (await requests.of_user(alice))[0].answer == "Gnosis is planned for March."
    assert [r.request_id for r in await requests.listed(RequestStatus.ANSWERED)] == [asked]
    assert [r.topic for r in await requests.of_user(bob)] == [SupportTopic.BILLING]


async def test_every_project_is_listed_with_its_owner(engine: AsyncEngine) -> None:
    store = Store(engine)
    alice = await store.create_user("alice@example.com", NOW)
    await store.create_project(alice, "One", PlanName.FREE, [80002], NOW)
    await store.create_project(alice, "Two", PlanName.PRO, [137], LATER)
    listed = await every_project(engine)
    assert [(p.project.name, p.project.plan, p.owner_email) for p in listed] == [
        ("One", PlanName.FREE, "alice@example.com"),
        ("Two", PlanName.PRO, "alice@example.com"),
    ]


async def test_maintenance_written_by_one_process_is_read_by_another(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(maintenance_module, "FRESH_FOR_SECONDS", 0.2)
    operator = ChainMaintenance((), MaintenanceRecords(engine))
    api = ChainMaintenance({8453}, MaintenanceRecords(engine))  # another process's view
    assert await api.window(84532) is None

    await operator.begin(84532, "node upgrade", NOW)
    assert (await operator.window(84532)).reason == "node upgrade"  # its own change at once
    await asyncio.sleep(0.25)  # the other process rereads within its short cache
    seen = await api.window(84532)
    assert seen is not None and seen.reason == "node upgrade" and seen.since == NOW
    assert (await api.window(8453)).reason == CONFIGURED_REASON  # the settings' flag

    await operator.begin(84532, "node upgrade, second pass", LATER)
    await operator.end(84532)
    await asyncio.sleep(0.25)
    assert await api.window(84532) is None
    assert sorted(await api.windows()) == [8453]
