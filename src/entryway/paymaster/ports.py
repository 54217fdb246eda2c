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
        `BudgetExceededError` when it would take the cycle's overage past the spending budget
        the project's owner set (nothing is held then)."""
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


@dataclass(frozen=True, slots=True)
class IssuedSignature:
    """A paymaster signature the service is about to return: to which project, for which op
    (as signed: paymaster fields set, no account signature), drawing on which hold."""

    project_id: str
    chain_id: int
    entry_point: str
    user_op_hash: str | None  # lower-case hex; None for an EIP-7702 op of unknown delegate
    op: UserOperation
    hold_key: str
    valid_until: int  # unix seconds, as signed
    at: datetime


class SignatureLog(Protocol):
    async def record(self, issued: IssuedSignature) -> None:
        """Keep the signature durably (once per chain and hash) before it is returned: a
        UserOperationEvent naming our paymaster is charged by it, whoever submits the op."""
        ...


ENTRYWAY = "entryway"  # a mined op that came through this service's bundler
EXTERNAL = "external"  # another bundler's, or a handleOps sent straight to the EntryPoint


@dataclass(frozen=True, slots=True)
class StoredSignature:
    signature_id: str
    project_id: str
    chain_id: int
    entry_point: str
    user_op_hash: str | None
    op: UserOperation
    hold_key: str
    valid_until: int
    created_at: datetime
    block_number: int | None = None
    transaction_hash: str | None = None
    submitted_by: str | None = None


@dataclass(frozen=True, slots=True)
class EventCursor:
    """How far a chain's paymaster events were read."""

    next_block: int
    final_block: int
    final_time: int  # the timestamp of `final_block`


class SignatureBook(Protocol):
    async def for_event(
        self, chain_id: int, user_op_hash: str, sender: str, nonce: int
    ) -> StoredSignature | None: ...

    async def mark_mined(
        self,
        signature_id: str,
        user_op_hash: str,
        block_number: int,
        transaction_hash: str,
        submitted_by: str,
    ) -> None: ...

    async def for_hold(self, project_id: str, hold_key: str) -> list[StoredSignature]: ...

    async def cursor(self, chain_id: int) -> EventCursor | None: ...

    async def save_cursor(self, chain_id: int, cursor: EventCursor) -> None: ...
