"""Support requests (their levels, the operator's queue, answers and overdue alerts) and chain
maintenance in a real database (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.plans import PlanName, SupportLevel
from entryway.domain.support import RequestStatus, ResponseTargets, SupportTopic
from entryway.service import maintenance as maintenance_module
from entryway.service.maintenance import CONFIGURED_REASON, ChainMaintenance
from entryway.service.support_overdue import overdue_family, overdue_requests
from entryway.storage.maintenance import MaintenanceRecords
from entryway.storage.project_directory import every_project
from entryway.storage.store import Store
from entryway.storage.support import AlreadyAnsweredError, SupportRequests

NOW = datetime(2026, 11, 21, 12, tzinfo=UTC)
LATER = NOW + timedelta(hours=1)
OPERATOR = "ops@example.com"
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

    answered = await requests.answer(asked, "Gnosis is planned for March.", LATER, by=OPERATOR)
    assert answered.status is RequestStatus.ANSWERED and answered.answered_at == LATER
    assert answered.answered_by == OPERATOR
    with pytest.raises(AlreadyAnsweredError):
        await requests.answer(asked, "A second answer", LATER, by="someone@example.com")
    assert (await requests.get(asked)).answered_by == OPERATOR  # the first answer stands
    assert (await requests.of_user(alice))[0].answer == "Gnosis is planned for March."
    assert [r.request_id for r in await requests.listed(RequestStatus.ANSWERED)] == [asked]
    assert [r.topic for r in await requests.of_user(bob)] == [SupportTopic.BILLING]


async def test_the_queue_orders_open_requests_by_level_then_age(engine: AsyncEngine) -> None:
    store = Store(engine)
    alice = await store.create_user("alice@example.com", NOW)
    requests = SupportRequests(engine)
    hour = timedelta(hours=1)
    filed = {}
    for name, level, at in [
        ("community old", SupportLevel.COMMUNITY, NOW),
        ("priority new", SupportLevel.PRIORITY, NOW + 3 * hour),
        ("sla new", SupportLevel.SLA, NOW + 4 * hour),
        ("community new", SupportLevel.COMMUNITY, NOW + 5 * hour),
        ("priority old", SupportLevel.PRIORITY, NOW + hour),
        ("sla old", SupportLevel.SLA, NOW + 2 * hour),
    ]:
        filed[await requests.file(alice, None, SupportTopic.OTHER, name, None, at, level)] = name
    queue = await requests.queue()
    assert [r.message for r in queue] == [
        "sla old", "sla new", "priority old", "priority new", "community old", "community new"
    ]  # fmt: skip
    assert {r.level for r in queue if r.message.startswith("sla")} == {SupportLevel.SLA}

    sla_old = next(rid for rid, name in filed.items() if name == "sla old")
    await requests.answer(sla_old, "Done.", NOW + 6 * hour, by=OPERATOR)
    assert (await requests.queue())[0].message == "sla new"  # answered: gone


async def test_an_overdue_request_is_counted_and_logged_once(
    engine: AsyncEngine, caplog: pytest.LogCaptureFixture
) -> None:
    store = Store(engine)
    alice = await store.create_user("alice@example.com", NOW)
    requests = SupportRequests(engine)
    targets = ResponseTargets(community_hours=72, priority_hours=24, sla_hours=4)
    sla = await requests.file(alice, None, SupportTopic.TECHNICAL, "Down", None, NOW,
                              SupportLevel.SLA)  # fmt: skip
    priority = await requests.file(alice, None, SupportTopic.BILLING, "Invoice", None, NOW,
                                   SupportLevel.PRIORITY)  # fmt: skip
    await requests.file(alice, None, SupportTopic.OTHER, "Hello", None, NOW)  # community

    caplog.set_level(logging.WARNING, "entryway.service.support_overdue")
    assert await overdue_requests(requests, targets, NOW + timedelta(hours=4)) == []  # due now
    five_hours = NOW + timedelta(hours=5)
    assert [r.request_id for r in await overdue_requests(requests, targets, five_hours)] == [sla]
    assert [r.message for r in caplog.records] == [
        f"support request overdue: {sla} (sla_and_dedicated_account_manager support) "
        "filed 2026-11-21T12:00+00:00, due 2026-11-21T16:00+00:00, unanswered"
    ]
    # Seen again (another scrape, another process): still overdue, not logged again.
    again = await overdue_requests(SupportRequests(engine), targets, five_hours)
    assert [r.request_id for r in again] == [sla] and len(caplog.records) == 1
    assert (await requests.get(sla)).overdue_noted_at == five_hours

    next_day = NOW + timedelta(hours=25)
    overdue = await overdue_requests(requests, targets, next_day)
    assert [r.request_id for r in overdue] == [sla, priority]  # in queue order
    assert len(caplog.records) == 2 and priority in caplog.records[1].getMessage()
    gauge = {s.labels["level"]: s.value for s in overdue_family(overdue).samples}
    assert gauge == {"community": 0, "priority": 1, "sla_and_dedicated_account_manager": 1}

    await requests.answer(sla, "Back up.", next_day, by=OPERATOR)  # answered late
    assert [r.request_id for r in await overdue_requests(requests, targets, next_day)] == [priority]


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


async def test_requests_in_flight_when_maintenance_goes_stale_read_it_once(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = MaintenanceRecords(engine)
    reads: list[int] = []
    read = records.windows

    async def counted() -> object:
        reads.append(1)
        return await read()

    monkeypatch.setattr(records, "windows", counted)
    api = ChainMaintenance((), records)
    assert await asyncio.gather(*(api.window(84532) for _ in range(20))) == [None] * 20
    assert reads == [1]
    await api.begin(84532, "node upgrade", NOW)  # its own change: read again at once
    seen = await asyncio.gather(*(api.window(84532) for _ in range(5)))
    assert reads == [1, 1]
    assert {w.reason for w in seen if w is not None} == {"node upgrade"} and None not in seen
