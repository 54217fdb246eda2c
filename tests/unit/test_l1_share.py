"""An op's share of its bundle's L1 data fee: split by its bytes in the bundle, whole wei,
and the shares of a bundle's ops add up to exactly what the bundle paid."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from entryway import contracts
from entryway.domain.l1_share import packed_op_size, split_fee

EP = contracts.load("EntryPoint").abi
BENEFICIARY = "0x000000000000000000000000000000000000dEaD"


def _packed(init: bytes, call: bytes, pm: bytes, sig: bytes) -> tuple[object, ...]:
    sender = "0x" + "11" * 20
    return (sender, 7, init, call, bytes(32), 50_000, bytes(32), pm, sig)


@given(st.lists(st.tuples(*[st.binary(max_size=200)] * 4), min_size=1, max_size=4))
def test_op_size_is_its_bytes_in_the_handle_ops_calldata(
    fields: list[tuple[bytes, bytes, bytes, bytes]],
) -> None:
    ops = [_packed(*f) for f in fields]
    empty = len(EP.encode_call("handleOps", [], BENEFICIARY))
    full = len(EP.encode_call("handleOps", ops, BENEFICIARY))
    assert full - empty == sum(packed_op_size(*f) for f in fields)


@given(
    st.integers(min_value=0, max_value=10**18),
    st.lists(st.integers(min_value=0, max_value=10**6), min_size=1, max_size=20),
)
def test_shares_are_whole_wei_summing_to_the_fee(total: int, weights: list[int]) -> None:
    shares = split_fee(total, weights)
    assert sum(shares) == total
    assert all(s >= 0 for s in shares)
    whole = sum(weights) or len(weights)
    for share, weight in zip(shares, weights, strict=True):
        exact = total * (weight if sum(weights) else 1)
        assert share * whole <= exact + whole and exact < (share + 1) * whole + whole


def test_an_op_alone_bears_the_whole_fee_and_heavier_ops_bear_more() -> None:
    assert split_fee(12_345, [900]) == [12_345]
    assert split_fee(10, [1, 1, 1]) == [4, 3, 3]
    assert split_fee(1_000, [300, 100]) == [750, 250]
    assert split_fee(5, []) == []


def test_negative_figures_are_refused() -> None:
    with pytest.raises(ValueError):
        split_fee(-1, [1])
    with pytest.raises(ValueError):
        split_fee(1, [-1, 2])
