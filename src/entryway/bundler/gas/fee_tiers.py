"""The fees the bundler suggests for a new op, in three tiers (slow, standard, fast). Pure.

What `pimlico_getUserOperationGasPrice` / `entryway_getUserOperationGasPrice` answer, and
what the service's SDK and wallets price ops with. Every tier passes the bundler's own
checks on a send (`entryway.bundler.validation.sanity`): the tip is at least the chain's
minimum and at most the fee, the fee covers the base fee with headroom for it to rise while
the client signs and sends (EIP-1559 lets it rise 12.5% a block), and neither is above the
chain's ceiling. Tiers never decrease from slow to fast.
"""

from __future__ import annotations

from dataclasses import dataclass

# (% of the node's suggested tip, % of the latest base fee). Standard pays the suggestion
# itself: a margin on top would feed back where our own ops set the suggestion (a devnet, a
# quiet chain) and raise it every block. Slow's 125% covers about two blocks of base-fee
# rises, standard's 150% three to four, fast's 200% six.
FEE_TIERS: dict[str, tuple[int, int]] = {
    "slow": (90, 125),
    "standard": (100, 150),
    "fast": (125, 200),
}


@dataclass(frozen=True, slots=True)
class GasPrice:
    max_fee_per_gas: int
    max_priority_fee_per_gas: int


def fee_tiers(
    *, base_fee: int, suggested_tip: int, min_tip: int, max_fee: int
) -> dict[str, GasPrice]:
    """Every tier's fees from the latest base fee and the node's suggested tip, the tip never
    under `min_tip` (the chain's minimum), neither fee over `max_fee` (the chain's ceiling)."""
    out = {}
    for tier, (tip_pct, base_pct) in FEE_TIERS.items():
        tip = max(max(suggested_tip, min_tip) * tip_pct // 100, min_tip)
        fee = min(base_fee * base_pct // 100 + tip, max_fee)
        out[tier] = GasPrice(fee, min(tip, fee))
    return out
