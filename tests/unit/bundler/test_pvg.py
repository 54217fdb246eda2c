from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from entryway.bundler.gas.pvg import minimum_pre_verification_gas, pre_verification_gas
from entryway.domain.userop import UserOperation

OP = UserOperation(
    sender="0x1111111111111111111111111111111111111111",
    nonce=0,
    call_data=b"\x01\x02",
    call_gas_limit=100_000,
    verification_gas_limit=100_000,
    pre_verification_gas=50_000,
    max_fee_per_gas=10**9,
    max_priority_fee_per_gas=10**9,
    signature=b"\x01" * 65,
)


def test_small_ops_need_about_forty_thousand() -> None:
    assert 38_000 < pre_verification_gas(OP.with_signature(b""), 50_000) <= 42_000
    # Each signature byte is calldata too.
    assert pre_verification_gas(OP, 50_000) > pre_verification_gas(OP.with_signature(b""), 50_000)


def test_calldata_heavy_ops_pay_the_eip7623_floor() -> None:
    heavy = replace(OP, call_data=b"\x11" * 1000)
    light_need = pre_verification_gas(OP, 50_000)
    heavy_need = pre_verification_gas(heavy, 50_000)
    assert heavy_need - light_need > 1000 * 16  # above the standard 16 gas per byte


@given(st.binary(max_size=2000), st.integers(0, 2_000_000))
def test_minimum_is_a_lower_bound(call_data: bytes, used: int) -> None:
    op = replace(OP, call_data=call_data)
    assert minimum_pre_verification_gas(op) <= pre_verification_gas(op, used)


@given(st.binary(max_size=500), st.binary(max_size=500))
def test_more_calldata_never_costs_less(a: bytes, b: bytes) -> None:
    small, large = replace(OP, call_data=a), replace(OP, call_data=a + b)
    assert pre_verification_gas(small, 0) <= pre_verification_gas(large, 0)
