"""Billing cycles under random histories of grants, purchases, consumption, expiry, plan
changes and cycle closes: credits are never created or lost, plan changes wait for the next
cycle, each cycle is invoiced once at its own plan, overage is billed exactly."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from entryway.domain.billing import BillingConfig, Subscription, close_cycle, forecast
from entryway.domain.credits import CreditAccount, CreditLot, LotKind
from entryway.domain.plans import PlanName, plan

START = datetime(2026, 1, 31, 9, tzinfo=UTC)
CONFIG = BillingConfig({PlanName.PRO: 3}, enterprise_monthly_credits=70_000_000)

purchase = st.tuples(st.just("buy"), st.integers(1, 10_000_000))
consume = st.tuples(st.just("use"), st.integers(0, 30_000_000))
wait = st.tuples(st.just("wait"), st.integers(0, 120))  # days
change = st.tuples(st.just("plan"), st.sampled_from(list(PlanName)))
close = st.tuples(st.just("close"))
steps = st.lists(st.one_of(purchase, consume, wait, change, close), max_size=50)


@given(st.sampled_from(list(PlanName)), steps)
def test_random_billing_histories_account_for_every_credit_and_euro(
    first_plan: PlanName, history: list[tuple[object, ...]]
) -> None:
    now = START
    sub = Subscription(first_plan, now)
    account = CreditAccount().add(
        CreditLot.new("g0", LotKind.GRANT, CONFIG.monthly_grant(plan(first_plan)), now)
    )
    plan_at_cycle_start = {sub.cycle_start: sub.plan}
    used_from_lots = overage_recorded = overage_billed = 0
    invoices = []
    for n, step in enumerate(history):
        kind = step[0]
        if kind == "buy":
            account = account.add(CreditLot.new(f"b{n}", LotKind.PURCHASE, step[1], now))  # type: ignore[arg-type]
        elif kind == "use":
            account, used = account.consume(step[1], now)  # type: ignore[arg-type]
            used_from_lots += used.from_lots
            overage_recorded += used.overage
        elif kind == "wait":
            now += timedelta(days=step[1])  # type: ignore[arg-type]
        elif kind == "plan":
            before = sub
            sub = sub.change_plan(step[1])  # type: ignore[arg-type]
            assert (sub.plan, sub.cycle_start) == (before.plan, before.cycle_start)  # not yet
        else:
            while sub.due(now):
                account, overage = account.close_cycle()
                result = close_cycle(sub, overage, CONFIG)
                inv = result.invoice
                assert inv.plan == plan_at_cycle_start[sub.cycle_start]
                assert inv.overage_micro_eur == overage * CONFIG.overage_rate(plan(inv.plan))
                assert inv.total_micro_eur == inv.plan_price_micro_eur + inv.overage_micro_eur
                assert inv.cycle_end == result.next.cycle_start > inv.cycle_start
                overage_billed += overage
                invoices.append(inv)
                sub = result.next
                plan_at_cycle_start[sub.cycle_start] = sub.plan
                if result.grant:
                    lot = CreditLot.new(
                        f"g{n}-{len(invoices)}", LotKind.GRANT, result.grant, sub.cycle_start
                    )
                    account = account.add(lot)
        granted = sum(lot.amount for lot in account.lots)
        remaining = sum(lot.remaining for lot in account.lots)
        assert granted == used_from_lots + remaining  # nothing created or lost
        assert account.balance(now) + account.expired(now) == remaining
    assert overage_billed + account.cycle_overage == overage_recorded
    # Cycles are back to back: each invoice starts where the previous one ended.
    for a, b in itertools.pairwise(invoices):
        assert a.cycle_end == b.cycle_start


def test_a_plan_change_waits_for_the_next_cycle_and_can_be_cancelled() -> None:
    sub = Subscription(PlanName.STARTER, START).change_plan(PlanName.SCALE)
    assert (sub.plan, sub.next_plan) == (PlanName.STARTER, PlanName.SCALE)
    assert sub.change_plan(PlanName.STARTER).next_plan is None  # cancelled
    result = close_cycle(sub, 10, CONFIG)
    assert (
        result.invoice.plan is PlanName.STARTER and result.invoice.plan_price_micro_eur == 5_000_000
    )
    assert result.next == Subscription(PlanName.SCALE, datetime(2026, 2, 28, 9, tzinfo=UTC))
    assert result.grant == 50_000_000
    enterprise = close_cycle(Subscription(PlanName.ENTERPRISE, START), 0, CONFIG)
    assert enterprise.grant == 70_000_000


def test_the_forecast_projects_the_last_weeks_pace() -> None:
    sub = Subscription(PlanName.STARTER, datetime(2026, 11, 1, tzinfo=UTC))  # 30-day cycle
    ten_days = datetime(2026, 11, 11, tzinfo=UTC)
    week = {"window_start": datetime(2026, 11, 4, tzinfo=UTC), "window_used": 700_000}
    outlook = forecast(sub, used=1_000_000, balance=1_500_000, at=ten_days, **week)
    # 100,000 a day over the 20 days left
    assert (outlook.projected, outlook.projected_overage) == (3_000_000, 500_000)
    assert forecast(sub, 1_000_000, 5_000_000, ten_days, **week).projected_overage == 0
