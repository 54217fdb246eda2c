"""Operator endpoints, behind the operator token (ENTRYWAY_ADMIN_TOKEN; `entryway up` makes one
in the data directory): create a user's project and its first key (an admin key), issue a key
to an existing project (say, one whose admin keys were all lost), record a paid credit
purchase, approve or reject paid plan changes and credit packs, set a project's ENTERPRISE
terms, close the billing cycles that are due. API keys never reach these."""

from __future__ import annotations

import hmac
import re
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response

from entryway.domain.apikeys import KeyRole
from entryway.domain.approvals import ApprovalStatus
from entryway.domain.billing import EnterpriseTerms
from entryway.service.key_grants import grantable, key_out, no_store, supported
from entryway.service.problems import Problem
from entryway.service.routes_billing import invoice_out
from entryway.service.schemas import (
    AdminKeyCreate,
    AdminProjectCreate,
    AdminProjectCreated,
    CycleCloseOut,
    KeyCreated,
    Purchase,
    PurchaseOut,
)
from entryway.service.schemas_approvals import (
    ApprovalDecision,
    ApprovalOut,
    EnterpriseTermsIn,
    EnterpriseTermsOut,
)
from entryway.service.services import Services
from entryway.storage.approvals import Approvals, UnknownApprovalError
from entryway.storage.ledger import IdempotencyKeyReusedError, purchase_lot_id
from entryway.storage.store import UnknownError


async def operator(request: Request) -> Services:
    services: Services = request.app.state.services
    header = request.headers.get("authorization", "")
    presented = header[7:].strip() if header.lower().startswith("bearer ") else ""
    token = services.admin_token
    if not token or not hmac.compare_digest(presented.encode(), token.encode()):
        raise Problem(
            401, "invalid_admin_token", "Operator token required",
            "send Authorization: Bearer <operator token> (ENTRYWAY_ADMIN_TOKEN)",
        )  # fmt: skip
    return services


Operator = Annotated[Services, Depends(operator)]
_APPROVAL_ID = re.compile(r"[0-9a-f-]{36}")


def admin_routes() -> APIRouter:
    router = APIRouter(prefix="/v1/admin", tags=["admin"])

    @router.post("/projects", operation_id="adminCreateProject", status_code=201)
    async def create_project(
        services: Operator, response: Response, body: AdminProjectCreate
    ) -> AdminProjectCreated:
        """A user (by email, made when new), a project on a plan with its first month's
        grant, and its first API key: an admin key for its chains."""
        store = services.store
        now = datetime.now(UTC)
        chains = supported(body.chains)
        owner = await store.user_by_email(body.email) or await store.create_user(body.email, now)
        project_id = await store.create_project(owner, body.name, body.plan, chains, now)
        key = await store.issue_key(project_id, body.environment, chains, now, role=KeyRole.ADMIN)
        no_store(response)
        return AdminProjectCreated(
            project_id=project_id, api_key=key.secret, key_id=key.key_id, role=KeyRole.ADMIN
        )

    @router.post("/projects/{project_id}/keys", operation_id="adminIssueKey", status_code=201)
    async def issue_key(
        services: Operator, response: Response, project_id: str, body: AdminKeyCreate
    ) -> KeyCreated:
        """A key for an existing project, on any of its chains, `service` unless `role`
        says `admin`: how a project that lost its admin keys gets one back. The secret is in
        this answer only. The operator is not held to the per-project key limit."""
        store = services.store
        try:
            project = await store.project(project_id)
        except UnknownError:
            raise _no_project(project_id) from None
        chains = grantable(body.chains, project.chains, None)
        key = await store.issue_key(
            project_id, body.environment, chains, datetime.now(UTC), role=body.role, capped=False
        )
        info = await store.api_keys.key(project_id, key.key_id)
        no_store(response)
        return KeyCreated(**key_out(info).model_dump(), api_key=key.secret)

    @router.post(
        "/projects/{project_id}/purchases", operation_id="adminRecordPurchase", status_code=201
    )
    async def purchase(services: Operator, project_id: str, body: Purchase) -> PurchaseOut:
        """A paid purchase becomes a lot valid 12 months; the same purchase again adds
        nothing (`created: false`); its id reused for another amount or project is a 409
        `idempotency_key_reused`."""
        try:
            await services.store.project(project_id)
        except UnknownError:
            raise _no_project(project_id) from None
        try:
            created = await services.store.ledger.purchase(
                project_id, body.purchase_id, body.credits, datetime.now(UTC)
            )
        except IdempotencyKeyReusedError as exc:
            raise Problem(409, "idempotency_key_reused", "Purchase id reused", str(exc)) from None
        return PurchaseOut(lot_id=purchase_lot_id(body.purchase_id), created=created)

    @router.get("/approvals", operation_id="adminListApprovals")
    async def list_approvals(
        services: Operator, status: ApprovalStatus = ApprovalStatus.PENDING
    ) -> list[ApprovalOut]:
        """Paid plan changes and credit packs in `status` (default pending, oldest first;
        decided ones newest first), at most 200."""
        found = await _approvals(services).with_status(status)
        return [ApprovalOut.of(a) for a in found]

    @router.post("/approvals/{approval_id}/approve", operation_id="adminApprove")
    async def approve(
        services: Operator, approval_id: str, body: ApprovalDecision | None = None
    ) -> ApprovalOut:
        """Apply a pending request: a plan change is scheduled for the next cycle, a credit
        pack becomes a lot valid 12 months (purchase id: the approval's). Deciding again
        changes nothing; the answer says how it was decided."""
        return await _decide(services, approval_id, True, body)

    @router.post("/approvals/{approval_id}/reject", operation_id="adminReject")
    async def reject(
        services: Operator, approval_id: str, body: ApprovalDecision | None = None
    ) -> ApprovalOut:
        """Refuse a pending request; nothing is applied."""
        return await _decide(services, approval_id, False, body)

    @router.put("/projects/{project_id}/enterprise-terms", operation_id="adminSetEnterpriseTerms")
    async def enterprise_terms(
        services: Operator, project_id: str, body: EnterpriseTermsIn
    ) -> EnterpriseTermsOut:
        """The project's own ENTERPRISE monthly price (micro-euros, VAT included) and monthly
        credits; null: the service-wide values. Cycle closes from now on use them."""
        terms = EnterpriseTerms(body.monthly_micro_eur, body.monthly_credits)
        try:
            await services.platform.billing.set_enterprise_terms(project_id, terms)
        except UnknownError:
            raise _no_project(project_id) from None
        return EnterpriseTermsOut(
            project_id=project_id,
            monthly_micro_eur=terms.monthly_micro_eur,
            monthly_credits=terms.monthly_credits,
        )

    @router.post("/billing/close-cycles", operation_id="adminCloseCycles")
    async def close_cycles(services: Operator) -> CycleCloseOut:
        """Close every cycle that has ended: invoices, scheduled plan changes, new grants.
        Safe to repeat (a cycle closes once). A project that cannot be closed is listed in
        `failedProjects` (and logged); the others close."""
        sweep = await services.platform.billing.close_all_due(datetime.now(UTC))
        return CycleCloseOut(
            invoices=[invoice_out(s) for s in sweep.closed], failed_projects=sweep.failed
        )

    @router.get("/paymaster", operation_id="adminPaymasterDeposits")
    async def paymaster(services: Operator) -> dict[str, object]:
        """Each paymaster's EntryPoint deposit, as last read, and whether it is under the
        alert threshold (top it up with `entryway paymaster deposit`): by chain, and on each
        chain one paymaster per EntryPoint release, v0.8's first. Not read yet: not listed."""
        return {
            "deposits": [
                {
                    "chainId": chain_id,
                    "entryPoint": d.entry_point,
                    "entryPointVersion": d.version.value,
                    "paymaster": d.paymaster,
                    "depositWei": str(d.reading.deposit_wei),
                    "thresholdWei": str(d.reading.threshold_wei),
                    "low": d.reading.low,
                }
                for chain_id in sorted(services.chains)
                for d in services.deposits_on(chain_id)
                if d.reading is not None
            ]
        }

    return router


def _approvals(services: Services) -> Approvals:
    return Approvals(services.store.engine, services.store.ledger)


async def _decide(
    services: Services, approval_id: str, approve: bool, body: ApprovalDecision | None
) -> ApprovalOut:
    if not _APPROVAL_ID.fullmatch(approval_id):
        raise _no_approval(approval_id)
    try:
        decision = await _approvals(services).decide(
            approval_id,
            approve=approve,
            decided_by="operator",
            at=datetime.now(UTC),
            note=body.note if body else None,
        )
    except UnknownApprovalError:
        raise _no_approval(approval_id) from None
    found = decision.approval
    wanted = ApprovalStatus.APPROVED if approve else ApprovalStatus.REJECTED
    if found.status is not wanted:
        raise Problem(
            409, "approval_decided", "Already decided",
            f"approval {approval_id} was {found.status.value} before",
        )  # fmt: skip
    return ApprovalOut.of(found)


def _no_approval(approval_id: str) -> Problem:
    return Problem(404, "approval_not_found", "Approval not found", f"no approval {approval_id}")


def _no_project(project_id: str) -> Problem:
    return Problem(404, "project_not_found", "Project not found", f"no project {project_id}")
