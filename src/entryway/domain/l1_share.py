"""Each op's share of its bundle's L1 data fee, on OP-stack chains (Base).

A bundle transaction pays one L1 fee for all the calldata it posts. An op's share is that
fee split in proportion to the bytes the op takes in the bundle's `handleOps` calldata: the
data the fee is for. Shares are whole wei and add up to the bundle's fee exactly (the
remainder goes, a wei each, to the largest fractions first), so the receipts of a bundle's
ops account for its whole L1 fee and for no more. An op alone in its bundle bears it all.
"""

from __future__ import annotations

from collections.abc import Sequence

WORD = 32
# PackedUserOperation's nine fields, each one head word; four are dynamic `bytes`.
_HEAD_WORDS = 9


def _padded(length: int) -> int:
    return -(-length // WORD) * WORD


def packed_op_size(
    init_code: bytes, call_data: bytes, paymaster_and_data: bytes, signature: bytes
) -> int:
    """The bytes one op takes in `handleOps(ops, beneficiary)` calldata: its offset in the
    array, its nine head words, and each dynamic field's length word and padded content."""
    tails = sum(
        WORD + _padded(len(field))
        for field in (init_code, call_data, paymaster_and_data, signature)
    )
    return WORD + _HEAD_WORDS * WORD + tails


def split_fee(total_wei: int, weights: Sequence[int]) -> list[int]:
    """`total_wei` split in proportion to `weights` (largest remainder): whole wei that sum
    to `total_wei`. Zero weights all round get equal parts."""
    if total_wei < 0 or any(w < 0 for w in weights):
        raise ValueError("fees and weights are never negative")
    if not weights:
        return []
    if sum(weights) == 0:
        weights = [1] * len(weights)
    whole = sum(weights)
    shares = [total_wei * w // whole for w in weights]
    left = total_wei - sum(shares)
    by_remainder = sorted(range(len(weights)), key=lambda i: (-(total_wei * weights[i] % whole), i))
    for i in by_remainder[:left]:
        shares[i] += 1
    return shares
