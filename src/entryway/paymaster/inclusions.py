"""A settled sponsorship and the block its op was mined in: what the settler records with
each settlement, and what a reorg that removes the block gives back (`storage.ledger_reorgs`
keeps them; `paymaster.reorgs` acts on them)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from entryway.domain.pricebook import Quote
from entryway.paymaster.ports import UsageRecord


@dataclass(frozen=True, slots=True)
class Inclusion:
    """Where an op's receipt says it was mined."""

    chain_id: int
    user_op_hash: str
    block_number: int
    transaction_hash: str


@dataclass(frozen=True, slots=True)
class Reversal:
    """A settlement given back because a reorg removed the block its op was mined in."""

    project_id: str
    chain_id: int
    user_op_hash: str
    hold_key: str
    event_id: str  # the settlement reversed
    reversal_event_id: str  # the explicit entry that gives it back
    credits: int  # given back
    block_number: int
    transaction_hash: str
    reversals: int  # of this hold's settlements, this one included


class InclusionLedger(Protocol):
    async def settle_included(
        self, project_id: str, hold_key: str, actual: Quote, at: datetime, inclusion: Inclusion
    ) -> UsageRecord:
        """Settle the hold on the op's receipt and record where it was mined; a hold whose
        settlements a reorg all reversed settles again, as a fresh charge."""
        ...
