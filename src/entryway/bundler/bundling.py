"""Choosing which mempool ops go into the next bundle. Pure.

Highest priority fee first (what the executor earns per gas), the oldest on ties; one op
per sender (ERC-7562's storage isolation holds for one op per account), within the gas
budget, throttled entities capped at THROTTLED_ENTITY_BUNDLE_COUNT, banned ones skipped,
and (checked later, by simulation) a paymaster never committed beyond its deposit. An op
left out keeps its place: the next bundle (another executor's, in the same block when the
block has room) considers it first again, in the same order.

The gas budget is a share of the chain's current block gas limit (read from the node with
each bundle), never more than the block has left after the bundles already sent for it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from entryway.bundler.mempool import MempoolEntry
from entryway.bundler.reputation import Reputation, ReputationStatus

# Gas the EntryPoint itself spends around the ops (handleOps overhead, beneficiary payment).
BUNDLE_OVERHEAD_GAS = 50_000


# The share of the block gas limit one bundle may use, per chain, where the settings give
# none: on Ethereum's L1 networks a bundle competes with every other transaction for the
# block (a quarter leaves the rest of the block to them and still carries ~100 ops); on a
# rollup blocks are frequent and roomy (a half); on a development node the bundles are
# nearly all there is (nine tenths).
BLOCK_GAS_SHARE_PERCENT = {1: 25, 11155111: 25, 17000: 25, 560048: 25, 31337: 90, 1337: 90}
OTHER_CHAIN_BLOCK_GAS_SHARE_PERCENT = 50


def block_gas_share_percent(chain_id: int, configured: int | None = None) -> int:
    """The chain's share of the block gas limit per bundle: configured, else its default."""
    if configured is not None:
        return configured
    return BLOCK_GAS_SHARE_PERCENT.get(chain_id, OTHER_CHAIN_BLOCK_GAS_SHARE_PERCENT)


@dataclass(frozen=True, slots=True)
class BundleLimits:
    block_gas_share_percent: int = OTHER_CHAIN_BLOCK_GAS_SHARE_PERCENT
    max_ops: int = 1_000  # a bound on the calldata and the checks of one bundle
    throttled_entity_bundle_count: int = 4

    def gas_budget(self, block_gas_limit: int, used_in_block: int = 0) -> int:
        """The gas the next bundle may take: its share of the block, and no more than the
        block has left after `used_in_block` (bundles already sent for it)."""
        share = block_gas_limit * self.block_gas_share_percent // 100
        return max(min(share, block_gas_limit - used_in_block), 0)


def effective_tip(entry: MempoolEntry, base_fee: int) -> int:
    op = entry.op
    return min(op.max_priority_fee_per_gas, op.max_fee_per_gas - base_fee)


def select_bundle(
    entries: Sequence[MempoolEntry],
    *,
    base_fee: int,
    reputation: Reputation,
    max_bundle_gas: int,
    limits: BundleLimits = BundleLimits(),
) -> list[MempoolEntry]:
    """The ops of the next bundle, its whole gas (EntryPoint overhead included) at most
    `max_bundle_gas`."""
    chosen: list[MempoolEntry] = []
    senders: set[str] = set()
    throttled_uses: Counter[str] = Counter()
    gas = BUNDLE_OVERHEAD_GAS
    # Lowest nonce per sender first, so the queue's head is what gets considered.
    heads: dict[str, MempoolEntry] = {}
    for entry in entries:
        current = heads.get(entry.op.sender)
        if current is None or entry.op.nonce < current.op.nonce:
            heads[entry.op.sender] = entry
    ranked = sorted(heads.values(), key=lambda e: (-effective_tip(e, base_fee), e.sequence))
    all_senders = {e.op.sender for e in entries}
    for entry in ranked:
        op = entry.op
        if len(chosen) >= limits.max_ops or op.sender in senders:
            continue
        if op.max_fee_per_gas < base_fee:
            continue  # would not pay this block's base fee
        if gas + entry.max_gas > max_bundle_gas:
            continue
        statuses = [(a, reputation.status(a)) for _, a, _ in entry.entities()]
        if any(s is ReputationStatus.BANNED for _, s in statuses):
            continue
        throttled = [a for a, s in statuses if s is ReputationStatus.THROTTLED]
        if any(throttled_uses[a] >= limits.throttled_entity_bundle_count for a in throttled):
            continue
        if entry.outcome.storage_touched & (all_senders - {op.sender}):
            continue  # STO-041: it would touch the storage of another sender in the bundle
        for a in throttled:
            throttled_uses[a] += 1
        senders.add(op.sender)
        gas += entry.max_gas
        chosen.append(entry)
    return chosen
