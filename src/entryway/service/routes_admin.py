"""Operator endpoints, behind the operator token (ENTRYWAY_ADMIN_TOKEN; `entryway up` makes one
in the data directory): create a user's project and its first key (an admin key), issue a key
to an existing project (say, one whose admin keys were all lost), record a paid credit
purchase, close the billing cycles that are due. API keys never reach these."""

from __future__ import annotations

import hmac
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response

from entryway.domain.apikeys import KeyRole
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
from entryway.service.services import Services
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
        this answer only."""
        store = services.store
        try:
            project = await store.project(project_id)
        except UnknownError:
            raise _no_project(project_id) from None
        chains = grantable(body.chains, project.chains, None)
        key = await store.issue_key(
            project_id, body.environment, chains, datetime.now(UTC), role=body.role
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
        """The paymaster's EntryPoint deposit per chain, as last read, and whether it is under
        the alert threshold (top it up with `entryway paymaster deposit`)."""
        return {
            "deposits": [
                {
                    "chainId": d.chain_id,
                    "paymaster": d.paymaster,
                    "depositWei": str(d.deposit_wei),
                    "thresholdWei": str(d.threshold_wei),
                    "low": d.low,
                }
                for d in sorted(services.deposits.values(), key=lambda d: d.chain_id)
            ]
        }

    return router


def _no_project(project_id: str) -> Problem:
    return Problem(404, "project_not_found", "Project not found", f"no project {project_id}")
