"""Entity reputation (ERC-7562): opsSeen / opsIncluded with hourly decay. Pure.

The operator's trusted entities (an allowlist of factories, paymasters and aggregators) are
counted like any other but never throttled or banned, and not held to the unstaked
entity's mempool allowance (UREP-020): an operator serving its own app vouches for them.
Every validation rule of ERC-7562 still applies to their ops."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class ReputationStatus(StrEnum):
    OK = "ok"
    THROTTLED = "throttled"
    BANNED = "banned"


@dataclass(frozen=True, slots=True)
class ReputationParams:
    min_inclusion_rate_denominator: int = 10  # a bundler's; a client's is 100
    throttling_slack: int = 10
    ban_slack: int = 50
    ban_ops_seen_penalty: int = 10_000
    inclusion_rate_factor: int = 10  # INCLUSION_RATE_FACTOR (UREP-020)


@dataclass(slots=True)
class ReputationEntry:
    address: str
    ops_seen: int = 0
    ops_included: int = 0


class Reputation:
    def __init__(
        self, params: ReputationParams = ReputationParams(), trusted: Iterable[str] = ()
    ) -> None:
        self.params = params
        self._entries: dict[str, ReputationEntry] = {}
        self._trusted = frozenset(a.lower() for a in trusted)

    @property
    def trusted(self) -> frozenset[str]:
        """The allowlist, lower-case addresses."""
        return self._trusted

    def is_trusted(self, address: str) -> bool:
        return address.lower() in self._trusted

    def _entry(self, address: str) -> ReputationEntry:
        entry = self._entries.get(address)
        if entry is None:
            entry = self._entries[address] = ReputationEntry(address)
        return entry

    def seen(self, address: str) -> None:
        self._entry(address).ops_seen += 1

    def unseen(self, address: str) -> None:
        """EREP-015: the paymaster is not blamed for an op the account or factory broke."""
        entry = self._entry(address)
        entry.ops_seen = max(entry.ops_seen - 1, 0)

    def included(self, address: str) -> None:
        self._entry(address).ops_included += 1

    def penalise(self, address: str) -> None:
        """GREP-040: the entity broke a bundle after passing the second validation."""
        entry = self._entry(address)
        entry.ops_seen = self.params.ban_ops_seen_penalty
        entry.ops_included = 0

    def set(self, address: str, ops_seen: int, ops_included: int) -> None:
        entry = self._entry(address)
        entry.ops_seen, entry.ops_included = ops_seen, ops_included

    def status(self, address: str) -> ReputationStatus:
        entry = self._entries.get(address)
        if entry is None or self.is_trusted(address):
            return ReputationStatus.OK
        max_seen = entry.ops_seen // self.params.min_inclusion_rate_denominator
        if max_seen > entry.ops_included + self.params.ban_slack:
            return ReputationStatus.BANNED
        if max_seen > entry.ops_included + self.params.throttling_slack:
            return ReputationStatus.THROTTLED
        return ReputationStatus.OK

    def ops_allowed_unstaked(self, address: str, base: int, max_included: int) -> int:
        """UREP-020: how many mempool ops an unstaked factory, paymaster or aggregator may have:
        `base + floor(inclusion_rate * inclusion_rate_factor) + min(ops_included,
        max_included)`, inclusion_rate being ops_included / ops_seen (nought before the
        first op is seen). An entity whose ops get mined earns room as it goes; one only ever
        seen keeps the base. The floor is taken on integers: exact, and the same count the
        reference bundler's float product gives."""
        if self.is_trusted(address):
            return max_included
        entry = self._entries.get(address)
        if entry is None:
            return base
        rate_bonus = 0
        if entry.ops_seen > 0:
            rate_bonus = self.params.inclusion_rate_factor * entry.ops_included // entry.ops_seen
        return base + rate_bonus + min(entry.ops_included, max_included)

    def decay(self) -> None:
        """Hourly: value = value * 23 // 24; entries that reach zero are forgotten."""
        for address in list(self._entries):
            entry = self._entries[address]
            entry.ops_seen = entry.ops_seen * 23 // 24
            entry.ops_included = entry.ops_included * 23 // 24
            if entry.ops_seen == 0 and entry.ops_included == 0:
                del self._entries[address]

    def entries(self) -> list[ReputationEntry]:
        return list(self._entries.values())

    def clear(self) -> None:
        self._entries.clear()
