"""Approvals in the database: paid plan changes and credit packs asked for by a project's
members or keys, and the operator's decisions.

A decision is taken once: the row moves from pending under a condition on its status, so two
operators (or two clicks) approving the same request apply it once. An approved plan change
is scheduled for the next cycle in the same transaction as the decision. An approved credit
pack is recorded as a purchase whose id is the approval's, so the lot is added once even
when recording it is repeated (approving an approved pack again only makes sure its lot is
there)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from entryway.domain.approvals import (
    CREDIT_PACKS,
    Approval,
    ApprovalKind,
    ApprovalStatus,
)
from entryway.domain.plans import PlanName
from entryway.errors import EntrywayError
from entryway.storage.ledger import Ledger, utc
from entryway.storage.schema import approvals, projects
from entryway.storage.store import Project, project_from_row

REPLACED = "replaced by a later plan request"
LIST_LIMIT = 200


class UnknownApprovalError(EntrywayError):
    """No such approval (or not this project's)."""


class ApprovalRequestError(EntrywayError):
    """A request that cannot wait for approval: an unknown pack or plan."""


@dataclass(frozen=True, slots=True)
class Decision:
    approval: Approval
    applied: bool  # this decision changed the approval (False: it was decided before)


def approval_from_row(r: Any) -> Approval:
    return Approval(
        approval_id=r.approval_id,
        project_id=r.project_id,
        kind=ApprovalKind(r.kind),
        subject=r.subject,
        requested_by=r.requested_by,
        status=ApprovalStatus(r.status),
        requested_at=utc(r.requested_at),
        decided_at=utc(r.decided_at) if r.decided_at else None,
        decided_by=r.decided_by,
        note=r.note,
    )


class Approvals:
    def __init__(self, engine: AsyncEngine, ledger: Ledger) -> None:
        self.engine = engine
        self.ledger = ledger

    async def request(
        self, project_id: str, kind: ApprovalKind, subject: str, requested_by: str, at: datetime
    ) -> Approval:
        """A pending request; the same one still pending is answered instead of a second.
        A project waits on one plan change at a time: a new one replaces the earlier."""
        _check_subject(kind, subject)
        async with self.engine.begin() as db:
            same = (
                await db.execute(
                    select(approvals).where(
                        approvals.c.project_id == project_id,
                        approvals.c.kind == kind.value,
                        approvals.c.subject == subject,
                        approvals.c.status == ApprovalStatus.PENDING.value,
                    )
                )
            ).first()
            if same is not None:
                return approval_from_row(same)
            if kind is ApprovalKind.PLAN_CHANGE:
                await _close_pending_plan_changes(db, project_id, requested_by, at)
            approval_id = str(uuid.uuid4())
            await db.execute(
                insert(approvals).values(
                    approval_id=approval_id,
                    project_id=project_id,
                    kind=kind.value,
                    subject=subject,
                    requested_by=requested_by,
                    status=ApprovalStatus.PENDING.value,
                    requested_at=at,
                )
            )
        return await self.approval(approval_id)

    async def withdraw_plan_changes(self, project_id: str, by: str, at: datetime) -> None:
        """The project chose a plan that needs no approval: earlier paid requests lapse."""
        async with self.engine.begin() as db:
            await _close_pending_plan_changes(db, project_id, by, at)

    async def record_plan_change(
        self, project_id: str, to: PlanName, by: str, at: datetime
    ) -> Approval:
        """A change that needs no approval (to FREE, or back to the current plan, which
        cancels a scheduled change), made by `by` (`user:<id>` or `key:<id>`): scheduled,
        and kept on the project's record beside the requests, in one transaction. Pending
        paid requests lapse, and an approved change it takes the place of before it took
        effect is marked cancelled, so that no page goes on showing it approved."""
        async with self.engine.begin() as db:
            await _close_pending_plan_changes(db, project_id, by, at)
            before = await _locked_project(db, project_id)
            if before.next_plan is not None and before.next_plan != to:
                await _cancel_approved(db, project_id, before.next_plan, to, at)
            await _schedule(db, project_id, to)
            if to == before.plan:
                note = (
                    f"kept {to.value}: cancelled the change to {before.next_plan.value}"
                    if before.next_plan is not None
                    else f"kept {to.value}"
                )
            else:
                note = "from the next cycle"
            approval_id = str(uuid.uuid4())
            await db.execute(
                insert(approvals).values(
                    approval_id=approval_id,
                    project_id=project_id,
                    kind=ApprovalKind.PLAN_CHANGE.value,
                    subject=to.value,
                    requested_by=by,
                    status=ApprovalStatus.DIRECT.value,
                    requested_at=at,
                    decided_at=at,
                    decided_by=by,
                    note=note,
                )
            )
        return await self.approval(approval_id)

    async def approval(self, approval_id: str, project_id: str | None = None) -> Approval:
        query = select(approvals).where(approvals.c.approval_id == approval_id)
        if project_id is not None:
            query = query.where(approvals.c.project_id == project_id)
        async with self.engine.connect() as db:
            row = (await db.execute(query)).one_or_none()
        if row is None:
            raise UnknownApprovalError(f"no approval {approval_id}")
        return approval_from_row(row)

    async def for_project(self, project_id: str, limit: int = LIST_LIMIT) -> list[Approval]:
        """The project's requests, newest first."""
        query = select(approvals).where(approvals.c.project_id == project_id)
        return await self._list(query, limit)

    async def with_status(self, status: ApprovalStatus, limit: int = LIST_LIMIT) -> list[Approval]:
        """Every project's requests in `status`: pending ones oldest first (the queue),
        decided ones newest first."""
        query = select(approvals).where(approvals.c.status == status.value)
        if status is ApprovalStatus.PENDING:
            query = query.order_by(approvals.c.requested_at, approvals.c.approval_id)
        else:
            query = query.order_by(approvals.c.decided_at.desc(), approvals.c.approval_id)
        async with self.engine.connect() as db:
            return [approval_from_row(r) for r in (await db.execute(query.limit(limit))).all()]

    async def decide(
        self,
        approval_id: str,
        *,
        approve: bool,
        decided_by: str,
        at: datetime,
        note: str | None = None,
    ) -> Decision:
        """Approve (apply) or reject a pending request, once. A request decided before is
        answered as it stands, with `applied` False."""
        status = ApprovalStatus.APPROVED if approve else ApprovalStatus.REJECTED
        async with self.engine.begin() as db:
            moved = await db.execute(
                update(approvals)
                .where(
                    approvals.c.approval_id == approval_id,
                    approvals.c.status == ApprovalStatus.PENDING.value,
                )
                .values(status=status.value, decided_at=at, decided_by=decided_by, note=note)
            )
            applied = moved.rowcount == 1
            row = (
                await db.execute(select(approvals).where(approvals.c.approval_id == approval_id))
            ).one_or_none()
            if row is None:
                raise UnknownApprovalError(f"no approval {approval_id}")
            found = approval_from_row(row)
            plan_change = found.kind is ApprovalKind.PLAN_CHANGE
            if applied and plan_change and found.status is ApprovalStatus.APPROVED:
                await _schedule(db, found.project_id, PlanName(found.subject))
        pack = found.pack
        if found.status is ApprovalStatus.APPROVED and pack is not None:
            # The approval's id is the purchase's: recording it again adds nothing.
            granted = found.decided_at or at
            await self.ledger.purchase(found.project_id, found.approval_id, pack.credits, granted)
        return Decision(found, applied)

    async def _list(self, query: Any, limit: int) -> list[Approval]:
        query = query.order_by(approvals.c.requested_at.desc(), approvals.c.approval_id)
        async with self.engine.connect() as db:
            return [approval_from_row(r) for r in (await db.execute(query.limit(limit))).all()]


def _check_subject(kind: ApprovalKind, subject: str) -> None:
    if kind is ApprovalKind.CREDIT_PACK and subject not in CREDIT_PACKS:
        raise ApprovalRequestError(f"no credit pack {subject!r}")
    if kind is ApprovalKind.PLAN_CHANGE and subject not in PlanName.__members__:
        raise ApprovalRequestError(f"no plan {subject!r}")


async def _close_pending_plan_changes(
    db: AsyncConnection, project_id: str, by: str, at: datetime
) -> None:
    await db.execute(
        update(approvals)
        .where(
            and_(
                approvals.c.project_id == project_id,
                approvals.c.kind == ApprovalKind.PLAN_CHANGE.value,
                approvals.c.status == ApprovalStatus.PENDING.value,
            )
        )
        .values(status=ApprovalStatus.REJECTED.value, decided_at=at, decided_by=by, note=REPLACED)
    )


async def _locked_project(db: AsyncConnection, project_id: str) -> Project:
    query = select(projects).where(projects.c.project_id == project_id)
    if db.dialect.name == "postgresql":
        query = query.with_for_update()
    return project_from_row((await db.execute(query)).one())


async def _cancel_approved(
    db: AsyncConnection, project_id: str, scheduled: PlanName, to: PlanName, at: datetime
) -> None:
    """The approved change to `scheduled`, still waiting for the next cycle, is undone."""
    latest = (
        await db.execute(
            select(approvals.c.approval_id)
            .where(
                approvals.c.project_id == project_id,
                approvals.c.kind == ApprovalKind.PLAN_CHANGE.value,
                approvals.c.status == ApprovalStatus.APPROVED.value,
                approvals.c.subject == scheduled.value,
            )
            .order_by(approvals.c.decided_at.desc())
            .limit(1)
        )
    ).one_or_none()
    if latest is None:
        return
    await db.execute(
        update(approvals)
        .where(approvals.c.approval_id == latest.approval_id)
        .values(
            status=ApprovalStatus.CANCELLED.value,
            note=f"cancelled on {at:%Y-%m-%d %H:%M} UTC: {to.value} chosen instead",
        )
    )


async def _schedule(db: AsyncConnection, project_id: str, to: PlanName) -> None:
    """The plan change for the next cycle, by the same rule as `Store.schedule_plan_change`,
    inside the decision's transaction."""
    project = await _locked_project(db, project_id)
    scheduled = project.subscription.change_plan(to).next_plan
    await db.execute(
        update(projects)
        .where(projects.c.project_id == project_id)
        .values(next_plan=scheduled.value if scheduled else None)
    )
