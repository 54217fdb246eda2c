"""Holds, settlement, cycle closes, invoices, alerts and usage queries in a real database
(SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.billing import BillingConfig
from entryway.domain.credits import CreditLot, LotKind
from entryway.domain.plans import PlanName
from entryway.domain.pricebook import OperationType, Quote
from entryway.storage.billing import Billing
from entryway.storage.ledger import LedgerError, UsageContext, UsageStatus
from entryway.storage.store import Store
from entryway.storage.usage import RequestCountKey, UsageQueries

NOW = datetime(2026, 11, 21, 12, tzinfo=UTC)


def sponsored(credits: int) -> Quote:
    return Quote.of(OperationType.SPONSORED_USER_OPERATION, relay=credits)


async def project(store: Store, plan: PlanName = PlanName.STARTER, grant: int = 0) -> str:
    owner = await store.create_user(f"{id(store)}-{asyncio.get_running_loop().time()}@x.org", NOW)
    return await store.create_project(owner, "p", plan, [80002], NOW, grant=grant)


async def lots(store: Store, pid: str) -> list[tuple[str, int]]:
    return [(lot.lot_id[-3:], lot.remaining) for lot in (await store.credit_account(pid)).lots]


async def test_settlement_draws_more_or_gives_back_to_the_lots_it_came_from(
    engine: AsyncEngine,
) -> None:
    store = Store(engine)
    pid = await project(store)
    await store.add_lot(pid, CreditLot.new(f"{pid}-old", LotKind.GRANT, 100, NOW - timedelta(1)))
    await store.add_lot(pid, CreditLot.new(f"{pid}-new", LotKind.PURCHASE, 100, NOW))
    ledger = store.ledger

    held = await ledger.hold(pid, "op-a", sponsored(150), NOW, subject="0xabc", chain_id=80002)
    assert (held.status, held.credits) == (UsageStatus.HELD, 150)
    assert await lots(store, pid) == [("old", 0), ("new", 50)]

    # Cheaper than held: the difference goes back to the newest draw first.
    settled = await ledger.settle(pid, "op-a", sponsored(120), NOW)
    assert (settled.status, settled.credits, settled.duplicate) == (UsageStatus.SETTLED, 120, False)
    assert await lots(store, pid) == [("old", 0), ("new", 80)]
    # Settling again changes nothing.
    again = await ledger.settle(pid, "op-a", sponsored(10), NOW)
    assert again.duplicate and again.credits == 120
    assert await lots(store, pid) == [("old", 0), ("new", 80)]

    # Dearer than held: the rest is drawn FIFO, beyond the lots it is overage.
    await ledger.hold(pid, "op-b", sponsored(50), NOW)
    dear = await ledger.settle(pid, "op-b", sponsored(100), NOW)
    assert (dear.credits, dear.overage) == (100, 20)
    assert await lots(store, pid) == [("old", 0), ("new", 0)]
    assert (await store.project(pid)).cycle_overage == 20


async def test_a_released_hold_gives_everything_back_overage_first(engine: AsyncEngine) -> None:
    store = Store(engine)
    pid = await project(store)
    await store.add_lot(pid, CreditLot.new(f"{pid}-one", LotKind.GRANT, 100, NOW))
    before = await lots(store, pid)
    await store.ledger.hold(pid, "op", sponsored(130), NOW)
    assert (await store.project(pid)).cycle_overage == 30
    released = await store.ledger.release(pid, "op", NOW)
    assert (released.status, released.credits, released.overage) == (UsageStatus.RELEASED, 0, 0)
    assert await lots(store, pid) == before
    assert (await store.project(pid)).cycle_overage == 0
    with pytest.raises(LedgerError):
        await store.ledger.release(pid, "never-held", NOW)
    assert await UsageQueries(engine).used_since(pid, NOW - timedelta(1)) == 0


async def test_cycle_close_invoices_applies_the_plan_change_and_grants_once(
    engine: AsyncEngine,
) -> None:
    store = Store(engine)
    owner = await store.create_user(f"close-{id(store)}@x.org", NOW)
    pid = await store.create_project(owner, "p", PlanName.STARTER, [80002], NOW)
    assert (await store.credit_account(pid)).balance(NOW) == 5_000_000
    await store.ledger.record_usage(pid, "big", "notarization", 5_000_250, NOW)
    await store.schedule_plan_change(pid, PlanName.PRO)
    project = await store.project(pid)
    assert (project.plan, project.next_plan, project.cycle_overage) == (
        PlanName.STARTER,
        PlanName.PRO,
        250,
    )
    billing = Billing(engine, BillingConfig({PlanName.STARTER: 2}))
    assert await billing.close_due_cycles(pid, NOW + timedelta(days=29)) == []  # mid-cycle

    later = NOW + timedelta(days=65)  # two cycles have ended
    closed = await billing.close_due_cycles(pid, later)
    assert [c.invoice.plan for c in closed] == [PlanName.STARTER, PlanName.PRO]
    first, second = (c.invoice for c in closed)
    assert (first.plan_price_micro_eur, first.overage_credits, first.overage_micro_eur) == (
        5_000_000,
        250,
        500,
    )
    assert first.total_micro_eur == 5_000_500
    assert (second.plan_price_micro_eur, second.overage_credits) == (20_000_000, 0)
    assert (first.cycle_start, first.cycle_end, second.cycle_end) == (
        NOW,
        datetime(2026, 12, 21, 12, tzinfo=UTC),
        datetime(2027, 1, 21, 12, tzinfo=UTC),
    )
    project = await store.project(pid)
    assert (project.plan, project.next_plan, project.cycle_overage) == (PlanName.PRO, None, 0)
    # Two PRO grants (one per new cycle); the STARTER lot was used up.
    assert (await store.credit_account(pid)).balance(later) == 40_000_000
    assert await billing.close_due_cycles(pid, later) == []
    assert len(await billing.invoices(pid)) == 2
    assert await billing.due_projects(later) == []


async def test_concurrent_closes_of_one_cycle_invoice_once(engine: AsyncEngine) -> None:
    store = Store(engine)
    pid = await project(store, PlanName.PRO)
    billing = Billing(engine)
    at = NOW + timedelta(days=31)
    results = await asyncio.gather(*(billing.close_due_cycles(pid, at) for _ in range(4)))
    assert sum(len(r) for r in results) == 1
    assert (await store.credit_account(pid)).balance(at) == 20_000_000


async def test_alerts_are_raised_once_per_kind_and_cycle(engine: AsyncEngine) -> None:
    store = Store(engine)
    pid = await project(store)
    billing = Billing(engine)
    assert await billing.raise_alert(pid, "credits.low", NOW, "low", NOW)
    assert not await billing.raise_alert(pid, "credits.low", NOW, "low again", NOW)
    assert await billing.raise_alert(pid, "credits.low", NOW + timedelta(31), "next cycle", NOW)
    assert sorted(a.detail for a in await billing.alerts(pid)) == ["low", "next cycle"]


async def test_purchases_are_lots_added_once(engine: AsyncEngine) -> None:
    store = Store(engine)
    pid = await project(store)
    assert await store.ledger.purchase(pid, "pay_1", 1_000, NOW)
    assert not await store.ledger.purchase(pid, "pay_1", 1_000, NOW)
    (lot,) = (await store.credit_account(pid)).lots
    assert (lot.kind, lot.amount, lot.expires_at) == (
        LotKind.PURCHASE,
        1_000,
        datetime(2027, 11, 21, 12, tzinfo=UTC),
    )


async def test_usage_breaks_down_by_every_grouping(engine: AsyncEngine) -> None:
    store = Store(engine)
    pid = await project(store, grant=1_000_000)
    ctx = UsageContext(key_id="k1", endpoint="rpc:eth_sendUserOperation", chain_id=80002)
    await store.ledger.record_usage(pid, "a", "relayed_user_operation", 300, NOW, ctx)
    await store.ledger.record_usage(pid, "b", "notarization", 500, NOW + timedelta(days=8))
    await store.ledger.hold(pid, "c", sponsored(900), NOW + timedelta(seconds=1))
    await store.ledger.release(pid, "c", NOW + timedelta(seconds=2))
    usage = UsageQueries(engine)
    day = f"{NOW:%Y-%m-%d}"
    counts = {RequestCountKey(pid, "k1", "get-sdk-defaults", 80002, day): (7, 0)}
    await usage.add_request_counts(counts)
    await usage.add_request_counts(counts)  # adds, does not replace

    since, until = NOW - timedelta(days=1), NOW + timedelta(days=30)
    by_op = await usage.breakdown(pid, since, until, "operation")
    assert by_op == {
        "notarization": {"credits": 500, "operations": 1, "requests": 0},
        "read": {"credits": 0, "operations": 0, "requests": 14},
        "relayed_user_operation": {"credits": 300, "operations": 1, "requests": 0},
    }
    by_key = await usage.breakdown(pid, since, until, "key")
    assert by_key["k1"] == {"credits": 300, "operations": 1, "requests": 14}
    by_week = await usage.breakdown(pid, since, until, "week")
    assert sorted(by_week) == ["2026-W47", "2026-W48"]
    assert (await usage.breakdown(pid, since, until, "month"))["2026-11"]["credits"] == 800
    assert set(await usage.breakdown(pid, since, until, "chain")) == {"80002", "-"}
    with pytest.raises(ValueError, match="grouping"):
        await usage.breakdown(pid, since, until, "colour")
    exported = [e async for e in usage.events(pid, since, until)]
    assert [e.idempotency_key for e in exported] == ["a", "c", "b"]
    assert exported[1].status == "released" and exported[1].credits == 0


async def test_group_commits_charge_each_key_once_across_projects(engine: AsyncEngine) -> None:
    from entryway.domain.plans import PlanName as Plan
    from entryway.service.metering import Meter
    from entryway.storage.ledger import Charge

    store = Store(engine)
    a = await project(store, grant=10_000)
    b = await project(store, grant=10_000)
    # In one batch: a duplicate key within the batch, two projects interleaved.
    batch = [
        Charge(a, "x", "notarization", 100, NOW),
        Charge(b, "x", "notarization", 200, NOW),
        Charge(a, "x", "notarization", 100, NOW),
        Charge(a, "y", "notarization", 300, NOW),
    ]
    records = await store.ledger.record_many(batch)
    assert [r.duplicate for r in records] == [False, False, True, False]
    assert records[0].event_id == records[2].event_id
    # A batch holding a key committed before: still once.
    again = await store.ledger.record_many([Charge(a, "y", "notarization", 300, NOW)])
    assert again[0].duplicate
    assert (await store.credit_account(a)).balance(NOW) == 10_000 - 400
    assert (await store.credit_account(b)).balance(NOW) == 10_000 - 200

    # Through the meter, 60 concurrent charges (20 of them retries) share commits.
    from entryway.domain.apikeys import KeyEnvironment
    from entryway.domain.pricebook import default_price_book
    from entryway.storage.billing import Billing
    from entryway.storage.store import Caller

    meter = Meter(store, Billing(engine), default_price_book(), clock=lambda: NOW)
    who = Caller("k", a, KeyEnvironment.TEST, frozenset(), frozenset(), True, Plan.STARTER)
    quote = Quote.of(OperationType.NOTARIZATION, service=10)
    keys = [f"m-{i % 40}" for i in range(60)]
    results = await asyncio.gather(
        *(meter.charge(who, quote, key, endpoint="test") for key in keys)
    )
    assert sum(not r.duplicate for r in results) == 40
    assert (await store.credit_account(a)).balance(NOW) == 10_000 - 400 - 400
