"""What waits for the operator: until a payment provider is configured, a paid plan or a
credit pack takes effect only once the operator approves it, never on a project key's word
alone. A change to FREE, or back to the current plan (cancelling a scheduled change), costs
nothing and needs no approval. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from entryway.domain.plans import MICRO_EUR_PER_CREDIT, PlanName


class ApprovalKind(StrEnum):
    PLAN_CHANGE = "plan_change"
    CREDIT_PACK = "credit_pack"


class ApprovalStatus(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    # An approved plan change undone, before it took effect, by a later change.
    CANCELLED = "cancelled"
    # A plan change that needed no approval (to FREE, or keeping the current plan), recorded
    # with who made it: a member in the dashboard or an admin key over the API.
    DIRECT = "direct"


@dataclass(frozen=True, slots=True)
class CreditPack:
    """Credits bought outside the monthly grant: a lot valid 12 months, priced like the
    plans' credits (1 EUR per million, VAT included)."""

    name: str
    credits: int

    @property
    def price_micro_eur(self) -> int:
        return self.credits * MICRO_EUR_PER_CREDIT


CREDIT_PACKS: dict[str, CreditPack] = {
    p.name: p
    for p in (
        CreditPack("5M", 5_000_000),
        CreditPack("20M", 20_000_000),
        CreditPack("100M", 100_000_000),
    )
}


@dataclass(frozen=True, slots=True)
class Approval:
    approval_id: str
    project_id: str
    kind: ApprovalKind
    subject: str  # the plan asked for, or the pack's name
    requested_by: str  # "user:<id>" or "key:<id>"
    status: ApprovalStatus
    requested_at: datetime
    decided_at: datetime | None = None
    decided_by: str | None = None
    note: str | None = None

    @property
    def pending(self) -> bool:
        return self.status is ApprovalStatus.PENDING

    @property
    def pack(self) -> CreditPack | None:
        return CREDIT_PACKS.get(self.subject) if self.kind is ApprovalKind.CREDIT_PACK else None


def plan_change_needs_approval(current: PlanName, to: PlanName) -> bool:
    """Whether moving from `current` to `to` must wait for the operator: any paid plan but the
    current one (staying on it cancels a scheduled change, which costs nothing)."""
    return to is not PlanName.FREE and to != current
