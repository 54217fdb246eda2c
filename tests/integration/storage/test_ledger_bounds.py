"""Bounds in the ledger on a real database (SQLite and PostgreSQL): without a spending budget
no hold is ever refused for credits, however far past the monthly credits; with one, a hold
past it is refused and holds nothing, while other charges go on; no amount beyond what the
database stores is written; a purchase id names one purchase; one poisoned row stops neither
the release sweep nor the cycle-close sweep for the others."""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.bounds import MAX_CREDITS
from entryway.domain.credits import (
    BudgetExceededError,
    CreditError,
    CreditLot,
    LotKind,
    add_months,
)
from entryway.domain.plans import PlanName
from entryway.domain.pricebook import OperationType, Quote, default_price_book
from entryway.paymaster.settlement import SPONSORED, SponsorshipSettler
from entryway.storage.billing import Billing
from entryway.storage.ledger import IdempotencyKeyReusedError, UsageStatus
from entryway.storage.schema import projects, usage_events
from entryway.storage.store import Store, grant_lot_id
from entryway.storage.usage import UsageQueries

NOW = datetime(2026, 11, 21, 12, tzinfo=UTC)


def sponsored(credits: int) -> Quote:
    return Quote.of(OperationType.SPONSORED_USER_OPERATION, sponsorship=credits)


async def project(store: Store, grant: int = 0, at: datetime = NOW) -> str:
    owner = await store.create_user(f"{uuid.uuid4()}@x.org", at)
    return await store.create_project(owner, "p", PlanName.FREE, [80002], at, grant=grant)


async def statuses(engine: AsyncEngine, pid: str) -> dict[str, str]:
    async with engine.connect() as db:
        rows = (
            await db.execute(
                select(usage_events.c.idempotency_key, usage_events.c.status).where(
                    usage_events.c.project_id == pid
                )
            )
        ).all()
    return {r.idempotency_key: r.status for r in rows}


async def test_without_a_budget_no_hold_is_ever_refused_for_credits(engine: AsyncEngine) -> None:
    store = Store(engine)
    pid = await project(store, grant=1_000)
    # Far past what the former ten-month ceiling allowed (10,000 credits here), in one hold
    # and then in many: operations go on, and the overage is billed at the cycle's close.
    held = await store.ledger.hold(pid, "big", sponsored(10_000_000), NOW)
    assert (held.credits, held.overage) == (10_000_000, 9_999_000)
    for i in range(5):
        await store.ledger.hold(pid, f"more-{i}", sponsored(MAX_CREDITS // 100), NOW)
    assert (await store.project(pid)).cycle_overage == 9_999_000 + 5 * (MAX_CREDITS // 100)
    with pytest.raises(CreditError):  # what the database cannot store is still refused
        await store.ledger.hold(pid, "absurd", sponsored(MAX_CREDITS + 1), NOW)


async def test_a_hold_past_the_owners_budget_is_refused_and_holds_nothing(
    engine: AsyncEngine,
) -> None:
    store = Store(engine)
    pid = await project(store, grant=500)
    await store.update_project(pid, overage_budget=1_000)
    ledger = store.ledger

    held = await ledger.hold(pid, "a", sponsored(1_500), NOW)  # the lot, then the whole budget
    assert (held.credits, held.overage) == (1_500, 1_000)
    with pytest.raises(BudgetExceededError) as refused:
        await ledger.hold(pid, "b", sponsored(1), NOW)
    assert (refused.value.credits, refused.value.overage, refused.value.budget) == (1, 1_000, 1_000)
    assert await statuses(engine, pid) == {"a": "held"}
    assert (await store.project(pid)).cycle_overage == 1_000

    await ledger.release(pid, "a", NOW)  # room again, exactly as much as before
    with pytest.raises(BudgetExceededError):
        await ledger.hold(pid, "c", sponsored(1_501), NOW)
    await ledger.hold(pid, "c", sponsored(1_500), NOW)

    # Other charges, and a hold's settlement, are never refused: billed at the close.
    relay = await ledger.record_usage(pid, "relay", "relayed_user_operation", 5_000, NOW)
    assert relay.overage == 5_000
    settled = await ledger.settle(pid, "c", sponsored(2_000), NOW)  # dearer than its hold
    assert (settled.credits, settled.overage) == (2_000, 1_500)
    assert (await store.project(pid)).cycle_overage == 6_500

    # A purchase covers holds again even past the budget (no overage), and so does lifting it.
    await ledger.purchase(pid, "pack", 100, NOW)
    assert (await ledger.hold(pid, "covered", sponsored(100), NOW)).overage == 0
    with pytest.raises(BudgetExceededError):
        await ledger.hold(pid, "d", sponsored(1), NOW)
    await store.update_project(pid, overage_budget=None)
    assert (await ledger.hold(pid, "d", sponsored(1), NOW)).overage == 1


async def test_concurrent_holds_never_take_the_overage_past_the_budget_together(
    engine: AsyncEngine,
) -> None:
    store = Store(engine)
    pid = await project(store, grant=0)
    await store.update_project(pid, overage_budget=1_000)
    ledger = store.ledger
    # Each fits alone; the project's lock lets only as many through as the budget holds.
    tries = await asyncio.gather(
        *(ledger.hold(pid, f"h{i}", sponsored(300), NOW) for i in range(6)),
        return_exceptions=True,
    )
    held = [t for t in tries if not isinstance(t, BaseException)]
    refused = [t for t in tries if isinstance(t, BaseException)]
    assert len(held) == 3 and all(isinstance(r, BudgetExceededError) for r in refused)
    assert (await store.project(pid)).cycle_overage == 900


async def test_no_amount_beyond_what_the_database_stores_is_written(engine: AsyncEngine) -> None:
    store = Store(engine)
    pid = await project(store, grant=1_000)
    ledger = store.ledger
    for credits in (MAX_CREDITS + 1, 2**63, 2**85):
        with pytest.raises(CreditError, match=str(MAX_CREDITS)):
            await ledger.record_usage(pid, f"charge-{credits}", "notarization", credits, NOW)
        with pytest.raises(CreditError, match=str(MAX_CREDITS)):
            await ledger.hold(pid, f"hold-{credits}", sponsored(credits), NOW)
    await ledger.hold(pid, "fine", sponsored(10), NOW)
    with pytest.raises(CreditError, match=str(MAX_CREDITS)):
        await ledger.settle(pid, "fine", sponsored(2**63), NOW)
    assert await statuses(engine, pid) == {"fine": "held"}
    assert await UsageQueries(engine).used_since(pid, NOW - timedelta(1)) == 10
    assert (await store.credit_account(pid)).balance(NOW) == 990


async def test_a_purchase_id_names_one_purchase(engine: AsyncEngine) -> None:
    store = Store(engine)
    mine, theirs = await project(store), await project(store)
    ledger = store.ledger
    assert await ledger.purchase(mine, "inv-1", 1_000, NOW) is True
    assert await ledger.purchase(mine, "inv-1", 1_000, NOW + timedelta(1)) is False  # a retry
    with pytest.raises(IdempotencyKeyReusedError, match="inv-1"):
        await ledger.purchase(mine, "inv-1", 2_000, NOW)
    with pytest.raises(IdempotencyKeyReusedError):
        await ledger.purchase(theirs, "inv-1", 1_000, NOW)
    assert (await store.credit_account(mine)).balance(NOW) == 1_000
    assert (await store.credit_account(theirs)).balance(NOW) == 0


async def test_one_poisoned_hold_does_not_stop_the_release_of_the_others(
    engine: AsyncEngine, caplog: pytest.LogCaptureFixture
) -> None:
    store = Store(engine)
    poisoned, healthy = await project(store), await project(store, grant=1_000)
    signed = datetime.now(UTC) - timedelta(hours=1)  # both windows long past
    # A held row the ledger cannot give back: credits it never drew from any lot.
    async with engine.begin() as db:
        await db.execute(
            insert(usage_events).values(
                event_id=str(uuid.uuid4()), project_id=poisoned, idempotency_key="poison",
                operation=SPONSORED, credits=5, overage=0, created_at=signed,
                status=UsageStatus.HELD.value,
            )
        )  # fmt: skip
    await store.ledger.hold(healthy, "fine", sponsored(100), signed)
    settler = SponsorshipSettler(store.ledger, default_price_book(), {})

    with caplog.at_level(logging.ERROR, "entryway.paymaster.settlement"):
        assert await settler.sweep() == 1
        assert await settler.sweep() == 0  # the poisoned hold is tried again, quietly
    assert await statuses(engine, healthy) == {"fine": "released"}
    assert (await store.credit_account(healthy)).balance(datetime.now(UTC)) == 1_000
    assert await statuses(engine, poisoned) == {"poison": "held"}
    logged = [r for r in caplog.records if "poison" in r.getMessage()]
    assert len(logged) == 1 and poisoned in logged[0].getMessage()


async def test_one_project_that_cannot_close_does_not_stop_the_others(
    engine: AsyncEngine, caplog: pytest.LogCaptureFixture
) -> None:
    store = Store(engine)
    healthy, blocked, unreadable = [await project(store, grant=10) for _ in range(3)]
    # The grant of its next cycle is already there: each close of `blocked` hits its key.
    next_grant = grant_lot_id(blocked, add_months(NOW, 1))
    await store.add_lot(blocked, CreditLot.new(next_grant, LotKind.GRANT, 1, NOW))
    async with engine.begin() as db:
        await db.execute(
            update(projects).where(projects.c.project_id == unreadable).values(plan="BOGUS")
        )
    billing = Billing(engine)
    at = NOW + timedelta(days=31)

    with caplog.at_level(logging.ERROR, "entryway.storage.billing"):
        sweep = await asyncio.wait_for(billing.close_all_due(at), 60)
        again = await asyncio.wait_for(billing.close_all_due(at), 60)
    assert [s.invoice.cycle_start for s in sweep.closed] == [NOW]
    assert [s.invoice_id for s in await billing.invoices(healthy)] == [sweep.closed[0].invoice_id]
    assert (sweep.failed, again.failed, again.closed) == ([blocked], [blocked], [])
    assert await billing.invoices(blocked) == []
    for pid in (blocked, unreadable):  # each named once, not once per sweep
        assert len([r for r in caplog.records if pid in r.getMessage()]) == 1
