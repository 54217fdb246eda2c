"""What waits for the operator: until a payment provider is configured, a plan change that
raises the bill, or a credit pack, takes effect only once the operator approves it, never on
a project key's word alone. A change that lowers the bill (a cheaper plan, FREE among them)
or keeps it (back to the current plan, cancelling a scheduled change) needs no approval:
like every plan change it takes effect when the next cycle starts. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from entryway.domain.plans import MICRO_EUR_PER_CREDIT, PlanName, plan


class ApprovalKind(StrEnum):
    PLAN_CHANGE = "plan_change"
    CREDIT_PACK = "credit_pack"


class ApprovalStatus(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    # An approved plan change undone, before it took effect, by a later change.
    CANCELLED = "cancelled"
    # A plan change that needed no approval (to a cheaper plan, or keeping the current one),
    # recorded with who made it: an owner in the dashboard or an admin key over the API.
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
    """Whether moving from `current` to `to` must wait for the operator: only a move that
    raises the monthly price. ENTERPRISE is priced by contract, so a move to it counts as
    raising and a move from it to a listed plan as lowering; staying on the current plan
    (which cancels a scheduled change) costs nothing."""
    if to == current:
        return False
    to_price = plan(to).monthly_price_micro_eur
    current_price = plan(current).monthly_price_micro_eur
    if to_price is None:  # to ENTERPRISE
        return True
    if current_price is None:  # from ENTERPRISE to a listed plan
        return False
    return to_price > current_price
