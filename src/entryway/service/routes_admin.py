"""Operator endpoints, behind the operator token (ENTRYWAY_ADMIN_TOKEN; `entryway up` makes one
in the data directory): create a user's project and first key, record a paid credit
purchase, close the billing cycles that are due. API keys never reach these."""

from __future__ import annotations

import hmac
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Request

from entryway.service.problems import Problem
from entryway.service.routes_billing import invoice_out
from entryway.service.routes_platform import _supported
from entryway.service.schemas import (
    AdminProjectCreate,
    AdminProjectCreated,
    CycleCloseOut,
    Purchase,
    PurchaseOut,
)
from entryway.service.services import Services
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
    async def create_project(services: Operator, body: AdminProjectCreate) -> AdminProjectCreated:
        """A user (by email, made when new), a project on a plan with its first month's
        grant, and an API key for its chains."""
        store = services.store
        now = datetime.now(UTC)
        chains = _supported(body.chains)
        owner = await store.user_by_email(body.email) or await store.create_user(body.email, now)
        project_id = await store.create_project(owner, body.name, body.plan, chains, now)
        key = await store.issue_key(project_id, body.environment, chains, now)
        return AdminProjectCreated(project_id=project_id, api_key=key.secret)

    @router.post(
        "/projects/{project_id}/purchases", operation_id="adminRecordPurchase", status_code=201
    )
    async def purchase(services: Operator, project_id: str, body: Purchase) -> PurchaseOut:
        """A paid purchase becomes a lot valid 12 months; the same purchase id twice adds
        nothing."""
        try:
            await services.store.project(project_id)
        except UnknownError:
            raise Problem(404, "project_not_found", "Project not found") from None
        created = await services.store.ledger.purchase(
            project_id, body.purchase_id, body.credits, datetime.now(UTC)
        )
        return PurchaseOut(lot_id=f"purchase-{body.purchase_id}", created=created)

    @router.post("/billing/close-cycles", operation_id="adminCloseCycles")
    async def close_cycles(services: Operator) -> CycleCloseOut:
        """Close every cycle that has ended: invoices, scheduled plan changes, new grants.
        Safe to repeat (a cycle closes once)."""
        billing = services.platform.billing
        now = datetime.now(UTC)
        closed = []
        for project_id in await billing.due_projects(now):
            closed.extend(await billing.close_due_cycles(project_id, now))
        return CycleCloseOut(invoices=[invoice_out(s) for s in closed])

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
