"""What a devnet's node says about fees, per chain: the real network's base fee floor and
suggested tip, and on OP-stack chains the L1 prices the GasPriceOracle stand-in quotes with.

Anvil alone suggests a 1 gwei tip everywhere and lets the base fee fall towards zero on
empty blocks; `DevnetFees` is what the fee layer in front of it answers instead. Pure: the
rewriting of node answers lives here, the transport in `fee_layer`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from entryway.domain.networks import GWEI, NETWORKS, ChainFamily

# op-geth's default minimum suggested tip (--gpo.minsuggestedpriorityfee): 0.001 gwei.
OP_STACK_MIN_SUGGESTED_TIP = GWEI // 1000
# Polygon PoS: a few gwei of base fee under the 25 gwei tip floor, ~30 gwei paid in all
# (the Polygonscan gas tracker's usual standard price).
POLYGON_BASE_FEE = 5 * GWEI
# How full the latest block must be before the suggested tip follows what blocks paid.
CONGESTED_GAS_USED_RATIO = 0.9


@dataclass(frozen=True, slots=True)
class L1Prices:
    """The Ecotone GasPriceOracle's inputs, as Base's L1Block contract would hold them."""

    l1_base_fee: int  # wei, the L1 (Ethereum) base fee
    blob_base_fee: int  # wei
    base_fee_scalar: int  # millionths
    blob_base_fee_scalar: int  # millionths


# Base mainnet's system config scalars; an Ethereum base fee of 1 gwei and blobs at their
# floor price of 1 wei, the usual state of Ethereum in 2025.
BASE_L1_PRICES = L1Prices(
    l1_base_fee=GWEI, blob_base_fee=1, base_fee_scalar=2269, blob_base_fee_scalar=1_055_762
)


@dataclass(frozen=True, slots=True)
class DevnetFees:
    base_fee_floor: int  # wei; the node starts there and never mines a block under it
    min_tip: int  # wei; the least tip the node suggests, as the real network's node does
    l1_oracle: str | None = None  # where the GasPriceOracle stand-in goes (OP-stack chains)
    l1_prices: L1Prices | None = None

    def tip(self, node_tip: int, latest_gas_used_ratio: float) -> int:
        """The tip to suggest. Like op-geth's and bor's oracles: the network's minimum while
        blocks have room; what recent blocks paid (never less) once they fill up."""
        if latest_gas_used_ratio < CONGESTED_GAS_USED_RATIO:
            return self.min_tip
        return max(node_tip, self.min_tip)

    def gas_price(self, next_base_fee: int, tip: int) -> int:
        """eth_gasPrice: the next block's base fee, never under the floor, plus the tip."""
        return max(next_base_fee, self.base_fee_floor) + tip

    def fee_history(self, history: dict[str, Any]) -> dict[str, Any]:
        """eth_feeHistory with every reward at least the minimum tip and every base fee at
        least the floor: what the real network's blocks show."""
        out = dict(history)
        if "baseFeePerGas" in history:
            out["baseFeePerGas"] = [
                hex(max(int(fee, 16), self.base_fee_floor)) for fee in history["baseFeePerGas"]
            ]
        if "reward" in history:
            out["reward"] = [
                [hex(max(int(r, 16), self.min_tip)) for r in block] for block in history["reward"]
            ]
        return out

    def filled(self, tx: dict[str, Any], next_base_fee: int, tip: int) -> dict[str, Any]:
        """`tx` with the fee fields its sender left out set as geth and bor fill them for
        eth_sendTransaction and eth_fillTransaction: the suggested tip, and a fee cap with
        room for the base fee to double. A legacy or access-list transaction gets a gas
        price. Fields the sender gave are kept, so a cap under the tip still fails as on
        the real network."""
        base_fee = max(next_base_fee, self.base_fee_floor)
        if "gasPrice" in tx or tx.get("type") in ("0x0", "0x1"):
            if "gasPrice" in tx:
                return tx
            return {**tx, "gasPrice": hex(self.gas_price(base_fee, tip))}
        out = dict(tx)
        out.setdefault("maxPriorityFeePerGas", hex(tip))
        if "maxFeePerGas" not in out:
            out["maxFeePerGas"] = hex(2 * base_fee + int(out["maxPriorityFeePerGas"], 16))
        return out


def devnet_fees(chain_id: int) -> DevnetFees | None:
    """The fee behaviour of `chain_id`'s network; None for a chain no network has (plain
    anvil)."""
    network = NETWORKS.get(chain_id)
    if network is None:
        return None
    rules = network.fee_rules
    if network.family is ChainFamily.POLYGON:
        return DevnetFees(
            base_fee_floor=rules.devnet_base_fee_per_gas or POLYGON_BASE_FEE,
            min_tip=rules.min_priority_fee_per_gas,
        )
    if network.family is ChainFamily.BASE:
        return DevnetFees(
            base_fee_floor=rules.devnet_base_fee_per_gas or GWEI // 200,
            min_tip=max(rules.min_priority_fee_per_gas, OP_STACK_MIN_SUGGESTED_TIP),
            l1_oracle=rules.l1_gas_price_oracle,
            l1_prices=BASE_L1_PRICES if rules.l1_gas_price_oracle else None,
        )
    return None
