"""Operator approvals of plan changes that raise the bill and of credit packs, and
per-project ENTERPRISE terms, in a real database (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.approvals import ApprovalKind, ApprovalStatus
from entryway.domain.billing import BillingConfig, EnterpriseTerms
from entryway.domain.credits import LotKind
from entryway.domain.plans import PlanName
from entryway.storage.approvals import REPLACED, Approvals
from entryway.storage.billing import Billing
from entryway.storage.store import Store

NOW = datetime(2026, 11, 21, 12, tzinfo=UTC)
LATER = NOW + timedelta(hours=1)


async def project(store: Store, plan: PlanName = PlanName.FREE) -> str:
    owner = await store.create_user(f"a-{id(store)}-{asyncio.get_running_loop().time()}@x", NOW)
    return await store.create_project(owner, "p", plan, [80002], NOW)


async def purchases(store: Store, pid: str) -> list[tuple[str, int]]:
    account = await store.credit_account(pid)
    return [(lot.lot_id, lot.amount) for lot in account.lots if lot.kind is LotKind.PURCHASE]


async def test_a_plan_change_waits_and_approving_twice_schedules_it_once(
    engine: AsyncEngine,
) -> None:
    store = Store(engine)
    approvals = Approvals(engine, store.ledger)
    pid = await project(store)
    asked = await approvals.request(pid, ApprovalKind.PLAN_CHANGE, "PRO", "key:k1", NOW)
    assert asked.pending
    again = await approvals.request(pid, ApprovalKind.PLAN_CHANGE, "PRO", "key:k1", NOW)
    assert again.approval_id == asked.approval_id  # the same request, not a second one
    assert (await store.project(pid)).next_plan is None  # nothing changes while pending
    assert [a.approval_id for a in await approvals.with_status(ApprovalStatus.PENDING)] == [
        asked.approval_id
    ]

    first = await approvals.decide(asked.approval_id, approve=True, decided_by="op", at=LATER)
    assert first.applied and first.approval.status is ApprovalStatus.APPROVED
    project_now = await store.project(pid)
    assert (project_now.plan, project_now.next_plan) == (PlanName.FREE, PlanName.PRO)

    # The user cancels; a second approval of the same request must not schedule PRO again.
    await store.schedule_plan_change(pid, PlanName.FREE)
    second = await approvals.decide(asked.approval_id, approve=True, decided_by="op", at=LATER)
    assert not second.applied
    assert (await store.project(pid)).next_plan is None
    rejected = await approvals.decide(asked.approval_id, approve=False, decided_by="op", at=LATER)
    assert not rejected.applied and rejected.approval.status is ApprovalStatus.APPROVED
    assert await approvals.with_status(ApprovalStatus.PENDING) == []


async def test_a_rejected_request_applies_nothing(engine: AsyncEngine) -> None:
    store = Store(engine)
    approvals = Approvals(engine, store.ledger)
    pid = await project(store)
    plan = await approvals.request(pid, ApprovalKind.PLAN_CHANGE, "SCALE", "user:u", NOW)
    pack = await approvals.request(pid, ApprovalKind.CREDIT_PACK, "20M", "user:u", NOW)
    for asked in (plan, pack):
        done = await approvals.decide(
            asked.approval_id, approve=False, decided_by="op", at=LATER, note="no payment"
        )
        assert done.applied
        assert (done.approval.status, done.approval.note) == (ApprovalStatus.REJECTED, "no payment")
        late = await approvals.decide(asked.approval_id, approve=True, decided_by="op", at=LATER)
        assert not late.applied and late.approval.status is ApprovalStatus.REJECTED
    assert (await store.project(pid)).next_plan is None
    assert await purchases(store, pid) == []


async def test_an_approved_pack_adds_one_lot_however_often_it_is_approved(
    engine: AsyncEngine,
) -> None:
    store = Store(engine)
    approvals = Approvals(engine, store.ledger)
    pid = await project(store)
    asked = await approvals.request(pid, ApprovalKind.CREDIT_PACK, "5M", "user:u", NOW)
    assert await purchases(store, pid) == []
    outcomes = await asyncio.gather(
        *(
            approvals.decide(asked.approval_id, approve=True, decided_by="op", at=LATER)
            for _ in range(3)
        )
    )
    assert sum(o.applied for o in outcomes) == 1
    assert await purchases(store, pid) == [(f"purchase-{asked.approval_id}", 5_000_000)]
    lot = next(lot for lot in (await store.credit_account(pid)).lots if lot.amount == 5_000_000)
    assert lot.expires_at == datetime(2027, 11, 21, 13, tzinfo=UTC)  # 12 months from approval
    assert (await store.credit_account(pid)).balance(LATER) == 6_000_000


async def test_a_new_plan_request_or_a_free_plan_replaces_the_waiting_one(
    engine: AsyncEngine,
) -> None:
    store = Store(engine)
    approvals = Approvals(engine, store.ledger)
    pid = await project(store)
    pro = await approvals.request(pid, ApprovalKind.PLAN_CHANGE, "PRO", "user:u", NOW)
    scale = await approvals.request(pid, ApprovalKind.PLAN_CHANGE, "SCALE", "user:u", LATER)
    replaced = await approvals.approval(pro.approval_id)
    assert (replaced.status, replaced.note) == (ApprovalStatus.REJECTED, REPLACED)
    await approvals.withdraw_plan_changes(pid, "user:u", LATER)
    assert (await approvals.approval(scale.approval_id)).status is ApprovalStatus.REJECTED
    assert [a.subject for a in await approvals.for_project(pid)] == ["SCALE", "PRO"]


async def test_a_projects_enterprise_terms_price_its_invoice_and_grant(
    engine: AsyncEngine,
) -> None:
    store = Store(engine)
    pid = await project(store, PlanName.ENTERPRISE)
    other = await project(store, PlanName.ENTERPRISE)
    billing = Billing(
        engine, BillingConfig(enterprise_monthly_micro_eur=900, enterprise_monthly_credits=7)
    )
    await billing.set_enterprise_terms(pid, EnterpriseTerms(2_000_000_000, 3_000_000_000))
    assert (await store.project(pid)).enterprise_terms == EnterpriseTerms(
        2_000_000_000, 3_000_000_000
    )
    after = NOW + timedelta(days=32)
    [mine] = await billing.close_due_cycles(pid, after)
    [theirs] = await billing.close_due_cycles(other, after)
    assert mine.invoice.plan_price_micro_eur == 2_000_000_000
    assert theirs.invoice.plan_price_micro_eur == 900  # the service-wide terms
    assert (await store.credit_account(pid)).balance(after) == 3_000_000_000
    assert (await store.credit_account(other)).balance(after) == 7
