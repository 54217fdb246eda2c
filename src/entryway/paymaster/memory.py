"""The paymaster's ports in memory: policies, holds and their counters in one object, with
the database adapters' semantics (holds idempotent per key, released holds not counted).
For tests, and for a paymaster run without a database."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from entryway.domain.pricebook import Quote
from entryway.domain.sponsorship import SponsorshipPolicy
from entryway.errors import EntrywayError
from entryway.paymaster.ports import UsageTotals


@dataclass(frozen=True, slots=True)
class MemoryUsageRecord:
    event_id: str
    credits: int
    overage: int
    duplicate: bool
    status: str


@dataclass(frozen=True, slots=True)
class HeldSponsorship:
    event_id: str
    project_id: str
    idempotency_key: str
    quote: Quote
    credits: int
    at: datetime
    key_id: str | None
    endpoint: str | None
    chain_id: int | None
    subject: str | None
    policy_id: str | None
    status: str = "held"

    def record(self, duplicate: bool) -> MemoryUsageRecord:
        return MemoryUsageRecord(self.event_id, self.credits, 0, duplicate, self.status)


class InMemorySponsorships:
    """A `PolicySource`, `SponsorshipUsage` and `SponsorshipLedger` at once."""

    def __init__(self, policies: Sequence[SponsorshipPolicy] = ()) -> None:
        self.policies: list[SponsorshipPolicy] = list(policies)
        self.events: dict[tuple[str, str], HeldSponsorship] = {}

    def add_policy(self, policy: SponsorshipPolicy) -> None:
        self.policies = [p for p in self.policies if p.policy_id != policy.policy_id] + [policy]

    async def project_policies(self, project_id: str) -> Sequence[SponsorshipPolicy]:
        return [p for p in self.policies if p.project_id == project_id]

    async def totals(
        self,
        project_id: str,
        policy_id: str,
        *,
        since: datetime | None,
        subject: str | None = None,
        excluding: str | None = None,
    ) -> UsageTotals:
        counted = [
            e
            for e in self.events.values()
            if e.project_id == project_id
            and e.policy_id == policy_id
            and e.status != "released"
            and (since is None or e.at >= since)
            and (subject is None or e.subject == subject)
            and e.idempotency_key != excluding
        ]
        return UsageTotals(sum(e.credits for e in counted), len(counted))

    async def hold(
        self,
        project_id: str,
        idempotency_key: str,
        quote: Quote,
        at: datetime,
        *,
        key_id: str | None,
        endpoint: str | None,
        chain_id: int | None,
        subject: str | None,
        policy_id: str | None,
    ) -> MemoryUsageRecord:
        existing = self.events.get((project_id, idempotency_key))
        if existing is not None:
            return existing.record(duplicate=True)
        event = HeldSponsorship(
            str(uuid.uuid4()), project_id, idempotency_key, quote, quote.credits, at,
            key_id, endpoint, chain_id, subject, policy_id,
        )  # fmt: skip
        self.events[project_id, idempotency_key] = event
        return event.record(duplicate=False)

    async def settle(
        self, project_id: str, idempotency_key: str, actual: Quote, at: datetime
    ) -> MemoryUsageRecord:
        event = self._held(project_id, idempotency_key)
        if event.status != "held":
            return event.record(duplicate=True)
        settled = replace(event, quote=actual, credits=actual.credits, status="settled")
        self.events[project_id, idempotency_key] = settled
        return settled.record(duplicate=False)

    async def release(
        self, project_id: str, idempotency_key: str, at: datetime
    ) -> MemoryUsageRecord:
        event = self._held(project_id, idempotency_key)
        if event.status != "held":
            return event.record(duplicate=True)
        released = replace(event, status="released")
        self.events[project_id, idempotency_key] = released
        return released.record(duplicate=False)

    def _held(self, project_id: str, idempotency_key: str) -> HeldSponsorship:
        try:
            return self.events[project_id, idempotency_key]
        except KeyError:
            raise EntrywayError(f"no sponsorship hold {idempotency_key}") from None
