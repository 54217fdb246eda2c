"""Request and response bodies of approvals and ENTERPRISE terms (camelCase on the wire)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import Field

from entryway.domain.approvals import Approval, ApprovalKind, ApprovalStatus
from entryway.domain.bounds import MAX_CREDITS
from entryway.domain.plans import PlanName
from entryway.service.schemas import Body, Label, Wire


class ApprovalOut(Wire):
    approval_id: str
    project_id: str
    kind: ApprovalKind
    status: ApprovalStatus
    plan: PlanName | None  # a plan change: the plan asked for
    pack: str | None  # a credit pack: its name
    credits: int | None  # a credit pack: its credits
    requested_by: str  # "user:<id>" or "key:<id>"
    requested_at: datetime
    decided_at: datetime | None
    decided_by: str | None
    note: str | None

    @classmethod
    def of(cls, a: Approval) -> ApprovalOut:
        pack = a.pack
        return cls(
            approval_id=a.approval_id,
            project_id=a.project_id,
            kind=a.kind,
            status=a.status,
            plan=PlanName(a.subject) if a.kind is ApprovalKind.PLAN_CHANGE else None,
            pack=pack.name if pack else None,
            credits=pack.credits if pack else None,
            requested_by=a.requested_by,
            requested_at=a.requested_at,
            decided_at=a.decided_at,
            decided_by=a.decided_by,
            note=a.note,
        )


class ApprovalDecision(Body):
    note: Label | None = None


Amount = Annotated[int, Field(strict=True, ge=0, le=MAX_CREDITS)]


class EnterpriseTermsIn(Body):
    """null (or absent): the service-wide value."""

    monthly_micro_eur: Amount | None = None
    monthly_credits: Amount | None = None


class EnterpriseTermsOut(Wire):
    project_id: str
    monthly_micro_eur: int | None
    monthly_credits: int | None
