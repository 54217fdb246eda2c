"""The ledger in a real database under random histories of grants, purchases, charges, holds
settled up or down or released, expiry and cycle closes: credits are never created or lost,
the lots match the domain model's FIFO, and overage is billed exactly once."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.billing import BillingConfig
from entryway.domain.plans import PlanName
from entryway.domain.pricebook import OperationType, Quote
from entryway.storage.billing import Billing
from entryway.storage.schema import usage_draws
from entryway.storage.store import Store

START = datetime(2026, 1, 31, 12, tzinfo=UTC)
_ids = itertools.count()

amount = st.integers(1, 3_000)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("buy"), amount),
        st.tuples(st.just("use"), st.integers(0, 3_000)),
        st.tuples(st.just("hold"), amount),
        st.tuples(st.just("settle"), st.integers(0, 4_000)),
        st.tuples(st.just("release"), st.just(0)),
        st.tuples(st.just("wait"), st.integers(0, 200)),
        st.tuples(st.just("close"), st.just(0)),
    ),
    max_size=25,
)


def quote(credits: int) -> Quote:
    return Quote.of(OperationType.SPONSORED_USER_OPERATION, relay=credits)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=steps)
async def test_random_ledger_histories_in_the_database(
    engine: AsyncEngine, history: list[tuple[str, int]]
) -> None:
    store = Store(engine)
    n = next(_ids)
    owner = await store.create_user(f"prop-{n}-{id(engine)}@example.org", START)
    pid = await store.create_project(owner, "p", PlanName.STARTER, [80002], START, grant=1_000)
    billing = Billing(engine, BillingConfig({PlanName.STARTER: 2}))
    now = START
    granted = 1_000
    charged = billed = 0  # credits charged net of give-backs; overage invoiced
    open_holds: list[tuple[str, int]] = []
    for i, (kind, value) in enumerate(history):
        key = f"{n}-{i}"
        if kind == "buy":
            await store.ledger.purchase(pid, key, value, now)
            granted += value
        elif kind == "use":
            await store.ledger.record_usage(pid, key, "notarization", value, now)
            charged += value
        elif kind == "hold":
            await store.ledger.hold(pid, key, quote(value), now)
            open_holds.append((key, value))
            charged += value
        elif kind in ("settle", "release") and open_holds:
            held_key, held = open_holds.pop(0)
            if kind == "settle":
                record = await store.ledger.settle(pid, held_key, quote(value), now)
                charged += value - held
                assert record.credits == value
            else:
                record = await store.ledger.release(pid, held_key, now)
                charged -= held
                assert record.credits == 0
        elif kind == "wait":
            now += timedelta(days=value)
        elif kind == "close":
            for closed in await billing.close_due_cycles(pid, now):
                billed += closed.invoice.overage_credits
                assert closed.invoice.overage_micro_eur == 2 * closed.invoice.overage_credits
                granted += 5_000_000  # STARTER's next grant
        account = await store.credit_account(pid)
        project = await store.project(pid)
        remaining = sum(lot.remaining for lot in account.lots)
        assert sum(lot.amount for lot in account.lots) == granted
        # Conservation: every credit granted is still in a lot or was charged; what the lots
        # could not cover is overage, billed or still on this cycle's counter. A give-back
        # after a close cannot lower a closed invoice, so billed overage can only exceed.
        from_lots = granted - remaining
        overage = project.cycle_overage + billed
        assert from_lots + overage >= charged
        assert all(0 <= lot.remaining <= lot.amount for lot in account.lots)
        async with engine.connect() as db:
            drawn = await db.scalar(
                select(func.coalesce(func.sum(usage_draws.c.credits), 0)).where(
                    usage_draws.c.lot_id.in_([lot.lot_id for lot in account.lots])
                )
            )
        assert int(drawn or 0) == from_lots  # every lot posting is traced to its events
    # Without closes in between, the equation is exact.
    if not any(kind == "close" for kind, _ in history):
        account = await store.credit_account(pid)
        project = await store.project(pid)
        from_lots = granted - sum(lot.remaining for lot in account.lots)
        assert from_lots + project.cycle_overage == charged
