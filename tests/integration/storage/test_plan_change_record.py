"""Plan changes that need no approval, as the project's record keeps them: who made each,
what it did to the requests waiting and to an approved change not yet in effect. A real
database (SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.approvals import ApprovalKind, ApprovalStatus
from entryway.domain.plans import PlanName
from entryway.storage.approvals import Approvals
from entryway.storage.store import Store

NOW = datetime(2026, 11, 21, 12, tzinfo=UTC)
LATER = NOW + timedelta(hours=1)
LATEST = NOW + timedelta(hours=2)


async def project(store: Store, plan: PlanName = PlanName.FREE) -> str:
    owner = await store.create_user(f"p-{id(store)}-{datetime.now(UTC).timestamp()}@x", NOW)
    return await store.create_project(owner, "p", plan, [80002], NOW)


async def test_a_change_made_with_a_key_cancels_the_approved_one_it_undoes(
    engine: AsyncEngine,
) -> None:
    store = Store(engine)
    approvals = Approvals(engine, store.ledger)
    pid = await project(store)
    asked = await approvals.request(pid, ApprovalKind.PLAN_CHANGE, "PRO", "user:owner", NOW)
    await approvals.decide(asked.approval_id, approve=True, decided_by="operator", at=NOW)
    assert (await store.project(pid)).next_plan is PlanName.PRO

    made = await approvals.record_plan_change(pid, PlanName.FREE, "key:abcd1234", LATER)
    assert (made.status, made.subject, made.requested_by) == (
        ApprovalStatus.DIRECT,
        "FREE",
        "key:abcd1234",
    )
    assert made.note == "kept FREE: cancelled the change to PRO"
    assert (await store.project(pid)).next_plan is None
    undone = await approvals.approval(asked.approval_id)
    assert undone.status is ApprovalStatus.CANCELLED
    assert undone.decided_by == "operator"  # the decision stays the operator's
    assert undone.note == "cancelled on 2026-11-21 13:00 UTC: FREE chosen instead"
    listed = [(a.subject, a.status) for a in await approvals.for_project(pid)]
    assert listed == [("FREE", ApprovalStatus.DIRECT), ("PRO", ApprovalStatus.CANCELLED)]


async def test_an_approved_change_in_effect_or_kept_stays_approved(engine: AsyncEngine) -> None:
    store = Store(engine)
    approvals = Approvals(engine, store.ledger)
    pid = await project(store, PlanName.PRO)
    old = await approvals.request(pid, ApprovalKind.PLAN_CHANGE, "PRO", "user:owner", NOW)
    # PRO is the current plan now (as if the approval took effect long ago): a change to
    # FREE schedules FREE and leaves the history alone.
    await approvals.decide(old.approval_id, approve=True, decided_by="operator", at=NOW)
    made = await approvals.record_plan_change(pid, PlanName.FREE, "user:owner", LATER)
    assert (made.note, (await store.project(pid)).next_plan) == (
        "from the next cycle",
        PlanName.FREE,
    )
    assert (await approvals.approval(old.approval_id)).status is ApprovalStatus.APPROVED
    kept = await approvals.record_plan_change(pid, PlanName.PRO, "user:owner", LATEST)
    assert kept.note == "kept PRO: cancelled the change to FREE"
    assert (await store.project(pid)).next_plan is None
    assert (await approvals.approval(old.approval_id)).status is ApprovalStatus.APPROVED


async def test_a_direct_change_closes_the_paid_request_waiting(engine: AsyncEngine) -> None:
    store = Store(engine)
    approvals = Approvals(engine, store.ledger)
    pid = await project(store)
    waiting = await approvals.request(pid, ApprovalKind.PLAN_CHANGE, "SCALE", "user:u", NOW)
    await approvals.record_plan_change(pid, PlanName.FREE, "key:k", LATER)
    assert (await approvals.approval(waiting.approval_id)).status is ApprovalStatus.REJECTED
    pending = await approvals.with_status(ApprovalStatus.PENDING)
    assert all(a.project_id != pid for a in pending)
