"""Choosing which mempool ops go into the next bundle. Pure.

Highest priority fee first (what the executor earns per gas), the oldest on ties; one op
per sender (ERC-7562's storage isolation holds for one op per account), within the gas
budget, throttled entities capped at THROTTLED_ENTITY_BUNDLE_COUNT, banned ones skipped,
and (checked later, by simulation) a paymaster never committed beyond its deposit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from entryway.bundler.mempool import MempoolEntry
from entryway.bundler.reputation import Reputation, ReputationStatus

# Gas the EntryPoint itself spends around the ops (handleOps overhead, beneficiary payment).
BUNDLE_OVERHEAD_GAS = 50_000


@dataclass(frozen=True, slots=True)
class BundleLimits:
    max_bundle_gas: int = 15_000_000
    max_ops: int = 64
    throttled_entity_bundle_count: int = 4


def effective_tip(entry: MempoolEntry, base_fee: int) -> int:
    op = entry.op
    return min(op.max_priority_fee_per_gas, op.max_fee_per_gas - base_fee)


def select_bundle(
    entries: Sequence[MempoolEntry],
    *,
    base_fee: int,
    reputation: Reputation,
    limits: BundleLimits = BundleLimits(),
) -> list[MempoolEntry]:
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
        if gas + entry.max_gas > limits.max_bundle_gas:
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
