"""What the paymaster needs from the rest of the service, as narrow ports.

`PolicySource` and `SponsorshipUsage` are implemented over the database in
`entryway.storage.policies`; `SponsorshipLedger` and `AcceptedOpLedger` by the credit ledger.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from entryway.domain.pricebook import Quote
from entryway.domain.sponsorship import SponsorshipPolicy
from entryway.domain.userop import UserOperation


@dataclass(frozen=True, slots=True)
class UsageTotals:
    credits: int
    operations: int


class UsageRecord(Protocol):
    """What the ledger answers about one usage event (the credit ledger's record fits)."""

    @property
    def event_id(self) -> str: ...

    @property
    def credits(self) -> int: ...

    @property
    def duplicate(self) -> bool: ...


class PolicySource(Protocol):
    async def project_policies(self, project_id: str) -> Sequence[SponsorshipPolicy]:
        """Every policy of the project, active or not."""
        ...


class SponsorshipUsage(Protocol):
    async def totals(
        self,
        project_id: str,
        policy_id: str,
        *,
        since: datetime | None,
        subject: str | None = None,
        excluding: str | None = None,
    ) -> UsageTotals:
        """Credits and ops the policy paid for from `since` (None: ever), for one sender
        (`subject`) or all, leaving out the event with idempotency key `excluding`; held and
        settled sponsorships count, released ones do not."""
        ...


class SponsorshipLedger(Protocol):
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
    ) -> UsageRecord:
        """Charge the quote as a held usage event, once per idempotency key; raise
        `CreditCeilingError` when the project cannot cover it (nothing is held then)."""
        ...

    async def settle(
        self, project_id: str, idempotency_key: str, actual: Quote, at: datetime
    ) -> UsageRecord:
        """Replace the hold by the actual cost, from the op's receipt."""
        ...

    async def release(self, project_id: str, idempotency_key: str, at: datetime) -> UsageRecord:
        """Give the held credits back: the op never landed."""
        ...


class SettlementLedger(SponsorshipLedger, Protocol):
    async def unreferenced_holds(
        self, operation: str, older_than: datetime
    ) -> list[tuple[str, str]]:
        """(project, idempotency key) of holds made before `older_than` that were never
        linked to a sent op."""
        ...


@dataclass(frozen=True, slots=True)
class SettlementTask:
    """The durable task that settles a sponsored op's hold from its receipt."""

    hold_key: str  # the hold's idempotency key, linked to the op's hash
    kind: str
    payload: Mapping[str, Any]
    run_at: datetime
    idempotency_key: str
    max_attempts: int


@dataclass(frozen=True, slots=True)
class AcceptedOp:
    """An op the bundler accepted, as the ledger records it: the relay charge (once per
    `usage_key`) and, when the service's paymaster sponsors it, its settlement."""

    project_id: str
    usage_key: str
    user_op_hash: str  # lower-case hex: the reference /op-status asks the credits of
    relay: Quote
    at: datetime
    key_id: str | None
    endpoint: str
    chain_id: int
    sender: str
    settlement: SettlementTask | None
    # Set when the chain's ops go through the durable intake (bundling = "intake"): the op is
    # written there in the same transaction, for the chain's bundler leader to bundle.
    intake: IntakeEntry | None = None


@dataclass(frozen=True, slots=True)
class IntakeEntry:
    entry_point: str
    op: UserOperation
    # The admitting replica's validation of the op (JSON, `bundler.validation.outcome_json`)
    # and the head block it was made at: the leader admits a fresh one without simulating.
    validation: str | None = None
    validated_block: int | None = None


class AcceptedOpLedger(Protocol):
    async def record_accepted_op(self, accepted: AcceptedOp) -> UsageRecord:
        """Charge the relay, link the hold to the op's hash and enqueue the settlement task,
        all in one transaction: all of it is recorded, or none. Idempotent per usage key."""
        ...
