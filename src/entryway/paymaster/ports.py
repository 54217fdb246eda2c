"""What the paymaster needs from the rest of the service, as narrow ports.

`PolicySource` and `SponsorshipUsage` are implemented over the database in
`entryway.storage.policies`; `SponsorshipLedger` by the credit ledger (its `hold`, `settle`
and `release`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from entryway.domain.pricebook import Quote
from entryway.domain.sponsorship import SponsorshipPolicy


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
        """Charge the quote as a held usage event, once per idempotency key."""
        ...

    async def settle(
        self, project_id: str, idempotency_key: str, actual: Quote, at: datetime
    ) -> UsageRecord:
        """Replace the hold by the actual cost, from the op's receipt."""
        ...

    async def release(self, project_id: str, idempotency_key: str, at: datetime) -> UsageRecord:
        """Give the held credits back: the op never landed."""
        ...
