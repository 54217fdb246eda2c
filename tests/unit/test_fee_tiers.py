"""The bundler's fee suggestion: three tiers, each within the bundler's own send checks."""

from __future__ import annotations

from hypothesis import assume, given
from hypothesis import strategies as st

from entryway.bundler.gas.fee_tiers import fee_tiers
from entryway.bundler.validation.sanity import SanityLimits, check_sanity
from entryway.domain.userop import UserOperation

GWEI = 10**9
POLYGON = SanityLimits.for_chain(80002)
BASE = SanityLimits.for_chain(84532)


def _op(max_fee: int, tip: int) -> UserOperation:
    return UserOperation(
        sender="0x" + "11" * 20,
        nonce=0,
        call_data=b"",
        call_gas_limit=100_000,
        verification_gas_limit=100_000,
        pre_verification_gas=60_000,
        max_fee_per_gas=max_fee,
        max_priority_fee_per_gas=tip,
    )


def test_polygon_tiers_never_tip_under_its_25_gwei_minimum() -> None:
    tiers = fee_tiers(
        base_fee=30 * GWEI,
        suggested_tip=1 * GWEI,  # what a node that ignores the minimum suggests
        min_tip=POLYGON.min_priority_fee_per_gas,
        max_fee=POLYGON.max_fee_per_gas,
    )
    assert POLYGON.min_priority_fee_per_gas == 25 * GWEI
    assert tiers["slow"].max_priority_fee_per_gas == 25 * GWEI
    assert tiers["standard"].max_priority_fee_per_gas == 25 * GWEI
    assert tiers["fast"].max_priority_fee_per_gas == 31_250_000_000
    assert tiers["standard"].max_fee_per_gas == 45 * GWEI + 25 * GWEI


def test_a_tiny_base_tip_is_followed() -> None:
    tiers = fee_tiers(
        base_fee=5_000_000, suggested_tip=1_000_000, min_tip=0, max_fee=BASE.max_fee_per_gas
    )
    assert tiers["standard"].max_priority_fee_per_gas == 1_000_000
    assert tiers["standard"].max_fee_per_gas == 7_500_000 + 1_000_000


def test_fees_stop_at_the_chains_ceiling() -> None:
    tiers = fee_tiers(base_fee=10**30, suggested_tip=10**31, min_tip=0, max_fee=10**20)
    for fee in tiers.values():
        assert fee.max_fee_per_gas == 10**20
        assert fee.max_priority_fee_per_gas == 10**20


@given(
    base_fee=st.integers(0, 10**13),
    suggested=st.integers(0, 10**12),
    limits=st.sampled_from([POLYGON, BASE]),
    rise=st.integers(100, 125),  # the base fee after the client signs, in % of the quote's
)
def test_every_tier_passes_the_send_checks_and_tiers_increase(
    base_fee: int, suggested: int, limits: SanityLimits, rise: int
) -> None:
    # A base fee above the chain's ceiling leaves nothing to accept.
    assume(base_fee * rise // 100 + limits.min_priority_fee_per_gas <= limits.max_fee_per_gas)
    tiers = fee_tiers(
        base_fee=base_fee,
        suggested_tip=suggested,
        min_tip=limits.min_priority_fee_per_gas,
        max_fee=limits.max_fee_per_gas,
    )
    order = [tiers[t] for t in ("slow", "standard", "fast")]
    assert [f.max_fee_per_gas for f in order] == sorted(f.max_fee_per_gas for f in order)
    tips = [f.max_priority_fee_per_gas for f in order]
    assert tips == sorted(tips)
    for fee in order:
        op = _op(fee.max_fee_per_gas, fee.max_priority_fee_per_gas)
        check_sanity(op, base_fee=base_fee * rise // 100, limits=limits)
