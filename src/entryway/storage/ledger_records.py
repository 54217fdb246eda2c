"""The credit ledger's records: what a charge is, what the ledger answers, its errors."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from entryway.domain.credits import CreditError, CreditLot
from entryway.domain.pricebook import Quote


class UsageStatus(StrEnum):
    HELD = "held"
    SETTLED = "settled"
    RELEASED = "released"
    # An explicit entry giving back a settlement whose op's block a reorg removed: negative
    # credits, overage and draws, the settlement itself left as it was (storage.ledger_reorgs).
    REVERSED = "reversed"


class LedgerError(CreditError):
    pass


class IdempotencyKeyReusedError(LedgerError):
    """An idempotency key seen before, now with another request: nothing was recorded."""


@dataclass(frozen=True, slots=True)
class UsageContext:
    """Where a charge came from, for the breakdowns and the sponsorship counters."""

    key_id: str | None = None
    endpoint: str | None = None
    chain_id: int | None = None
    subject: str | None = None  # a sender or wallet address
    policy_id: str | None = None
    reference: str | None = None  # what a client may ask the credits of (a userOpHash)


@dataclass(frozen=True, slots=True)
class Charge:
    """One charge to make: `record_usage`'s arguments, for `record_many`."""

    project_id: str
    idempotency_key: str
    operation: str
    credits: int
    at: datetime
    context: UsageContext | None = None
    quote: Quote | None = None
    status: UsageStatus = UsageStatus.SETTLED


@dataclass(frozen=True, slots=True)
class UsageRecord:
    event_id: str
    credits: int
    overage: int
    duplicate: bool  # the idempotency key was seen before: nothing was charged again
    status: UsageStatus = UsageStatus.SETTLED


def utc(moment: datetime) -> datetime:
    """SQLite hands datetimes back naive; they were stored as UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def lot_row(lot: CreditLot) -> dict[str, Any]:
    return {
        "lot_id": lot.lot_id,
        "kind": lot.kind.value,
        "amount": lot.amount,
        "remaining": lot.remaining,
        "granted_at": lot.granted_at,
        "expires_at": lot.expires_at,
    }


def quote_breakdown(quote: Quote | None) -> str | None:
    """The quote's components (credits, summing to its total) and, under "included", the
    figures already inside them (on OP-stack chains the L1 data fee, in wei and credits)."""
    if quote is None:
        return None
    doc: dict[str, object] = dict(quote.breakdown)
    if quote.included:
        doc["included"] = dict(quote.included)
    return json.dumps(doc)


def purchase_lot_id(purchase_id: str) -> str:
    return f"purchase-{purchase_id}"
