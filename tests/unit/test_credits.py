"""The credit ledger under random histories: credits are never created or lost, FIFO and
expiry hold, overage is exact."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from entryway.domain.credits import CreditAccount, CreditError, CreditLot, LotKind, add_months
from entryway.domain.plans import PLANS, PlanName, plan

START = datetime(2026, 1, 31, 12, tzinfo=UTC)

grant = st.tuples(st.just("lot"), st.integers(1, 5_000_000), st.sampled_from(list(LotKind)))
consume = st.tuples(st.just("use"), st.integers(0, 3_000_000))
wait = st.tuples(st.just("wait"), st.integers(0, 400))  # days
close = st.tuples(st.just("close"))
steps = st.lists(st.one_of(grant, consume, wait, close), max_size=60)


@given(steps)
def test_random_histories_keep_every_credit_accounted_for(
    history: list[tuple[object, ...]],
) -> None:
    account, now = CreditAccount(), START
    consumed_from_lots = billed_overage = recorded_overage = 0
    for n, step in enumerate(history):
        kind = step[0]
        if kind == "lot":
            account = account.add(CreditLot.new(f"lot-{n}", step[2], step[1], now))  # type: ignore[arg-type]
        elif kind == "wait":
            now += timedelta(days=step[1])  # type: ignore[arg-type]
        elif kind == "close":
            account, overage = account.close_cycle()
            billed_overage += overage
        else:
            wanted: int = step[1]  # type: ignore[assignment]
            before = account.balance(now)
            live_before = {lot.lot_id: lot.remaining for lot in account.lots if lot.live(now)}
            account, used = account.consume(wanted, now)
            # Exact split: lots first, the rest is overage.
            assert used.from_lots == min(wanted, before)
            assert used.overage == wanted - used.from_lots
            recorded_overage += used.overage
            consumed_from_lots += used.from_lots
            # FIFO: only live lots are drawn, in age order, each drained before the next.
            order = [lot.lot_id for lot in account.lots]
            drawn = [d.lot_id for d in used.draws]
            assert drawn == sorted(drawn, key=order.index)
            assert all(d.lot_id in live_before for d in used.draws)
            for draw in used.draws[:-1]:
                assert draw.credits == live_before[draw.lot_id]
        # Conservation: what was granted is spent, still there, or expired.
        granted = sum(lot.amount for lot in account.lots)
        assert granted == consumed_from_lots + sum(lot.remaining for lot in account.lots)
        assert account.balance(now) == sum(x.remaining for x in account.lots if now < x.expires_at)
        assert account.balance(now) + account.expired(now) == sum(x.remaining for x in account.lots)
    assert billed_overage + account.cycle_overage == recorded_overage


def test_a_lot_lasts_twelve_months_to_the_day() -> None:
    lot = CreditLot.new("a", LotKind.GRANT, 10, START)
    assert lot.expires_at == datetime(2027, 1, 31, 12, tzinfo=UTC)
    assert add_months(datetime(2028, 2, 29, tzinfo=UTC), 12) == datetime(2029, 2, 28, tzinfo=UTC)
    account = CreditAccount().add(lot)
    assert account.balance(lot.expires_at - timedelta(seconds=1)) == 10
    assert account.balance(lot.expires_at) == 0
    account, used = account.consume(4, lot.expires_at)
    assert used.overage == 4 and used.draws == ()


def test_oldest_lot_first_then_overage_without_refusal() -> None:
    old = CreditLot.new("old", LotKind.GRANT, 100, START)
    new = CreditLot.new("new", LotKind.PURCHASE, 50, START + timedelta(days=30))
    account = CreditAccount().add(new).add(old)
    account, used = account.consume(120, START + timedelta(days=31))
    assert [(d.lot_id, d.credits) for d in used.draws] == [("old", 100), ("new", 20)]
    account, used = account.consume(40, START + timedelta(days=32))
    assert used.from_lots == 30 and used.overage == 10
    account, billed = account.close_cycle()
    assert billed == 10 and account.cycle_overage == 0


def test_refund_restores_the_same_lots() -> None:
    account = CreditAccount().add(CreditLot.new("a", LotKind.GRANT, 10, START))
    held, used = account.consume(15, START)
    assert held.refund(used.draws, used.overage) == account
    with pytest.raises(CreditError):
        held.refund(used.draws, used.overage + 1)


def test_bad_amounts_are_refused() -> None:
    with pytest.raises(CreditError):
        CreditLot.new("x", LotKind.GRANT, 0, START)
    with pytest.raises(CreditError):
        CreditAccount().consume(-1, START)
    account = CreditAccount().add(CreditLot.new("x", LotKind.GRANT, 1, START))
    with pytest.raises(CreditError):
        account.add(CreditLot.new("x", LotKind.GRANT, 1, START))


def test_plans_are_the_required_ones() -> None:
    expected = {
        "FREE": (0, 1_000_000, False),
        "STARTER": (5_000_000, 5_000_000, True),
        "PRO": (20_000_000, 20_000_000, True),
        "SCALE": (50_000_000, 50_000_000, True),
        "ENTERPRISE": (None, None, True),
    }
    assert {
        p.name.value: (p.monthly_price_micro_eur, p.monthly_credits, p.mainnet)
        for p in PLANS.values()
    } == expected
    assert plan("ENTERPRISE").is_custom and not plan(PlanName.PRO).is_custom
    # Paid plans price credits at 1 EUR per million: one micro-euro each, as overage does.
    for name in (PlanName.STARTER, PlanName.PRO, PlanName.SCALE):
        p = plan(name)
        assert p.monthly_price_micro_eur == p.monthly_credits * p.overage_micro_eur_per_credit  # type: ignore[operator]
