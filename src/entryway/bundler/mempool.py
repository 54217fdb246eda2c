"""The mempool: per-sender nonce queues, fee-bump replacement, ERC-7562 mempool limits. Pure.

A sender holds at most one op per nonce. Replacing one takes at least 10% more on both
maxFeePerGas and maxPriorityFeePerGas. Unstaked senders are limited to
SAME_SENDER_MEMPOOL_COUNT ops, unstaked factories and paymasters to their UREP-020
allowance, throttled entities (senders too) to THROTTLED_ENTITY_MEMPOOL_COUNT; banned ones
are refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from entryway.bundler.errors import BundlerError, RpcErrorCode, invalid_params
from entryway.bundler.reputation import Reputation, ReputationStatus
from entryway.bundler.validation.outcome import MIN_VALIDITY_S, ValidationOutcome
from entryway.domain.userop import UserOperation

REPLACEMENT_BUMP_PERCENT = 10


@dataclass(frozen=True, slots=True)
class MempoolLimits:
    same_sender: int = 4  # SAME_SENDER_MEMPOOL_COUNT
    same_unstaked_entity: int = 10  # SAME_UNSTAKED_ENTITY_MEMPOOL_COUNT
    throttled_entity: int = 4  # THROTTLED_ENTITY_MEMPOOL_COUNT
    max_ops_allowed_unstaked_entity: int = 10_000
    max_size: int = 10_000
    throttled_entity_live_blocks: int = 10  # THROTTLED_ENTITY_LIVE_BLOCKS
    max_age_s: float = 3_600.0  # an op nobody bundled in an hour is stale
    min_validity_s: int = MIN_VALIDITY_S


@dataclass(slots=True)
class MempoolEntry:
    op: UserOperation
    user_op_hash: bytes
    outcome: ValidationOutcome
    sender_staked: bool
    factory_staked: bool
    paymaster_staked: bool
    received_at: float
    received_block: int
    sequence: int = field(default=0)

    @property
    def max_gas(self) -> int:
        return self.op.max_gas

    @property
    def max_cost(self) -> int:
        return self.op.required_prefund

    def accountable(self) -> list[str]:
        """Entities whose reputation the op counts toward: its factory and paymaster, and its
        sender only when staked (an unstaked sender is limited by count instead)."""
        out = [a for _, a, _ in self.entities()]
        if self.sender_staked:
            out.append(self.op.sender)
        return out

    def entities(self) -> Iterator[tuple[str, str, bool]]:
        """(role, address, staked) for the factory and paymaster it uses."""
        if self.op.factory is not None:
            yield "factory", self.op.factory, self.factory_staked
        if self.op.paymaster is not None:
            yield "paymaster", self.op.paymaster, self.paymaster_staked


def _bumped(old: int) -> int:
    return old + old * REPLACEMENT_BUMP_PERCENT // 100


class Mempool:
    def __init__(self, reputation: Reputation, limits: MempoolLimits = MempoolLimits()) -> None:
        self.reputation = reputation
        self.limits = limits
        self._by_hash: dict[bytes, MempoolEntry] = {}
        self._by_sender: dict[str, dict[int, MempoolEntry]] = {}
        self._sequence = 0

    def __len__(self) -> int:
        return len(self._by_hash)

    def get(self, user_op_hash: bytes) -> MempoolEntry | None:
        return self._by_hash.get(user_op_hash)

    def entries(self) -> list[MempoolEntry]:
        """In arrival order."""
        return sorted(self._by_hash.values(), key=lambda e: e.sequence)

    def for_sender(self, sender: str) -> list[MempoolEntry]:
        return sorted(self._by_sender.get(sender, {}).values(), key=lambda e: e.op.nonce)

    def _count_using(self, address: str, replacing: MempoolEntry | None) -> int:
        """Pending ops naming `address` as sender, factory or paymaster, the one an op would
        replace left out (it leaves as the new one enters)."""
        return sum(
            1
            for e in self._by_hash.values()
            if e is not replacing and address in (e.op.sender, e.op.factory, e.op.paymaster)
        )

    def check_admission(self, entry: MempoolEntry) -> MempoolEntry | None:
        """Raise if `entry` may not enter; return the entry it would replace, if any."""
        op = entry.op
        existing = self._by_sender.get(op.sender, {}).get(op.nonce)
        if existing is not None:
            self.check_replacement(existing.op, op)
        elif len(self._by_hash) >= self.limits.max_size:
            raise BundlerError(RpcErrorCode.INTERNAL_ERROR, "mempool is full")
        self._check_reputation(entry, replacing=existing)
        self._check_entity_roles(entry, replacing=existing)
        return existing

    def add(self, entry: MempoolEntry) -> MempoolEntry | None:
        replaced = self.check_admission(entry)
        if replaced is not None:
            self.remove(replaced.user_op_hash)
        self._sequence += 1
        entry.sequence = self._sequence
        self._by_hash[entry.user_op_hash] = entry
        self._by_sender.setdefault(entry.op.sender, {})[entry.op.nonce] = entry
        return replaced

    @staticmethod
    def check_replacement(old: UserOperation, new: UserOperation) -> None:
        if new.max_fee_per_gas < _bumped(old.max_fee_per_gas) or new.max_priority_fee_per_gas < (
            _bumped(old.max_priority_fee_per_gas)
        ):
            raise invalid_params(
                "replacement UserOperation must raise maxFeePerGas and maxPriorityFeePerGas "
                f"by at least {REPLACEMENT_BUMP_PERCENT}%"
            )

    def _check_reputation(self, entry: MempoolEntry, replacing: MempoolEntry | None) -> None:
        """Each participant in turn, sender first: banned (GREP-010), then throttled with
        THROTTLED_ENTITY_MEMPOOL_COUNT pending (SREP-030 for a sender), then unstaked over
        its allowance (UREP-010 for a sender, UREP-020 for a factory or paymaster). The
        throttled check precedes the count of an unstaked one, so a throttled sender is told
        it is throttled, as the reference bundler tells it; a refusal for want of stake is
        -32505, as ERC-7769 has it for an entity that needs stake it lacks."""
        op = entry.op
        participants = [("sender", op.sender, entry.sender_staked), *entry.entities()]
        for role, address, staked in participants:
            status = self.reputation.status(address)
            if status is ReputationStatus.BANNED:
                raise BundlerError(RpcErrorCode.BANNED_OR_THROTTLED, f"{role} {address} is banned")
            in_pool = self._count_using(address, replacing)
            if status is ReputationStatus.THROTTLED and in_pool >= self.limits.throttled_entity:
                raise BundlerError(
                    RpcErrorCode.BANNED_OR_THROTTLED,
                    f"{role} {address} is throttled: it already has {in_pool} ops in the "
                    f"mempool, the most a throttled entity may have",
                )
            if staked:
                continue
            allowed = self._unstaked_allowance(role, address)
            if in_pool >= allowed:
                raise BundlerError(
                    RpcErrorCode.STAKE_TOO_LOW,
                    f"unstaked {role} {address} already has {in_pool} ops in the mempool, "
                    f"the most it may have unstaked ({allowed}); stake it to send more",
                )

    def _unstaked_allowance(self, role: str, address: str) -> int:
        if role == "sender":  # UREP-010
            return self.limits.same_sender
        return self.reputation.ops_allowed_unstaked(  # UREP-020
            address,
            self.limits.same_unstaked_entity,
            self.limits.max_ops_allowed_unstaked_entity,
        )

    def _check_entity_roles(self, entry: MempoolEntry, replacing: MempoolEntry | None) -> None:
        self.check_roles(entry.op, replacing)

    def check_roles(self, op: UserOperation, replacing: MempoolEntry | None = None) -> None:
        """STO-040: an address is either a sender or an entity in the mempool, never both.
        (STO-041, touching another pending sender's storage, is enforced per bundle.)"""
        entity_addresses = {a for a in (op.factory, op.paymaster) if a is not None}
        for other in self._by_hash.values():
            if other is replacing or other.op.sender == op.sender:
                continue
            if op.sender in (other.op.factory, other.op.paymaster):
                raise BundlerError(
                    RpcErrorCode.BANNED_OPCODE,
                    f"The sender address {op.sender} is used as a different entity in another "
                    "UserOperation currently in mempool [STO-040]",
                )
            if other.op.sender in entity_addresses:
                raise BundlerError(
                    RpcErrorCode.BANNED_OPCODE,
                    f"A Paymaster or Factory at {other.op.sender} is used as a sender entity in "
                    "another UserOperation currently in mempool [STO-040]",
                )

    def committed_cost(self, paymaster: str, replacing: MempoolEntry | None = None) -> int:
        """EREP-010: the most the paymaster's pending ops may cost it."""
        return sum(
            e.max_cost
            for e in self._by_hash.values()
            if e.op.paymaster == paymaster and e is not replacing
        )

    def remove(self, user_op_hash: bytes) -> MempoolEntry | None:
        entry = self._by_hash.pop(user_op_hash, None)
        if entry is not None:
            queue = self._by_sender.get(entry.op.sender, {})
            queue.pop(entry.op.nonce, None)
            if not queue:
                self._by_sender.pop(entry.op.sender, None)
        return entry

    def remove_where(self, predicate: Callable[[MempoolEntry], bool]) -> list[MempoolEntry]:
        doomed = [e for e in self._by_hash.values() if predicate(e)]
        for e in doomed:
            self.remove(e.user_op_hash)
        return doomed

    def expire(
        self, *, now: int, block: int, received_before: float
    ) -> list[tuple[MempoolEntry, str]]:
        """Drop what can no longer be bundled: ops about to expire, ops older than the max age
        (`received_before`), and a throttled entity's ops after THROTTLED_ENTITY_LIVE_BLOCKS."""
        dropped: list[tuple[MempoolEntry, str]] = []
        for entry in list(self._by_hash.values()):
            reason = None
            ended_at_block = entry.outcome.expired_by_block(block)  # v0.9's ranges in blocks
            if ended_at_block is not None:
                reason = f"expired at block {ended_at_block}"
            elif entry.outcome.valid_until < now + self.limits.min_validity_s:
                reason = f"expires at {entry.outcome.valid_until}"
            elif entry.received_at < received_before:
                reason = "stale: not bundled within the mempool's maximum age"
            elif block - entry.received_block > self.limits.throttled_entity_live_blocks and any(
                self.reputation.status(a) is ReputationStatus.THROTTLED
                for _, a, _ in entry.entities()
            ):
                reason = "its throttled entity's ops live only a few blocks"
            if reason is not None:
                self.remove(entry.user_op_hash)
                dropped.append((entry, reason))
        return dropped

    def clear(self) -> None:
        self._by_hash.clear()
        self._by_sender.clear()
