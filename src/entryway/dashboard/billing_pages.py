"""Plan and billing: the plan and its scheduled change (a cheaper plan at once, a dearer
one or a credit pack once the operator approves it), this cycle so far, invoices (plan price
plus overage, in euros, VAT included) and credit lots with their expiry dates; the plans
page. The operator's side (approvals, ENTERPRISE terms) is in `operator_billing_pages`.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import APIRouter, Request
from fastapi.responses import Response

from entryway.dashboard import operator_billing_pages, web
from entryway.dashboard.euros import euros, per_million
from entryway.dashboard.operator_billing_pages import people
from entryway.domain.accounts import ProjectRole
from entryway.domain.approvals import (
    CREDIT_PACKS,
    ApprovalKind,
    plan_change_needs_approval,
)
from entryway.domain.billing import BillingConfig
from entryway.domain.bounds import MAX_CREDITS
from entryway.domain.plans import PLANS, Plan, PlanName
from entryway.domain.plans import plan as plan_of
from entryway.storage.approvals import Approvals

DONE = {
    "requested": "Requested. The operator approves plan changes that raise the bill and "
    "credit packs; you will see the decision here.",
    "scheduled": "Plan change scheduled for the next cycle.",
    "cancelled": "The scheduled plan change is cancelled.",
    "budget": "Spending budget saved.",
}


@dataclass(frozen=True, slots=True)
class PlanRow:
    plan: Plan
    price_micro_eur: int | None  # None: by contract
    credits: int | None
    overage_micro_eur_per_credit: int


def plan_rows(config: BillingConfig) -> list[PlanRow]:
    """Every plan with its price, credits and overage rate as this service bills them;
    ENTERPRISE's price and credits are by contract."""
    return [
        PlanRow(
            p,
            None if p.is_custom else config.monthly_price(p),
            None if p.is_custom else config.monthly_grant(p),
            config.overage_rate(p),
        )
        for p in PLANS.values()
    ]


def budget_from_form(value: str) -> int | None:
    """A spending budget as typed: whole credits (spaces and thousands separators allowed),
    empty for none; ValueError for anything else."""
    digits = value.strip().replace(",", "").replace(" ", "").replace("_", "")
    if not digits:
        return None
    if not digits.isascii() or not digits.isdigit() or int(digits) > MAX_CREDITS:
        raise ValueError(value)
    return int(digits)


def requester(who: web.Viewer) -> str:
    return f"user:{who.user_id}" if who.user_id else "operator"


def approvals_of(request: Request) -> Approvals:
    store = web.services(request).store
    return Approvals(store.engine, store.ledger)


def formats() -> dict[str, object]:
    return {"euros": euros, "per_million": per_million}


def routes() -> APIRouter:
    router = APIRouter()
    router.include_router(operator_billing_pages.routes())

    @router.get("/plans")
    async def plans(request: Request, who: web.SignedIn) -> Response:
        config = web.services(request).platform.billing.config
        context = {"rows": plan_rows(config), "packs": CREDIT_PACKS.values(), **formats()}
        return web.render(request, who, "plans.html", context)

    @router.get("/projects/{project_id}/billing")
    async def billing(request: Request, project_id: str, who: web.SignedIn) -> Response:
        page = await web.project_page(request, who, project_id)
        return await billing_page(request, who, page)

    @router.post("/projects/{project_id}/billing/plan")
    async def change_plan(request: Request, project_id: str, who: web.SignedIn) -> Response:
        page = await web.project_page(request, who, project_id)
        data = await web.form(request, who)
        if page.role is not ProjectRole.OWNER:
            return await billing_page(
                request, who, page, error="Only the project's owners change its plan.", status=403
            )
        try:
            to = PlanName(web.text(data, "plan"))
        except ValueError:
            return await billing_page(request, who, page, error="Choose a plan.", status=400)
        project = page.project
        approvals = approvals_of(request)
        if plan_change_needs_approval(project.plan, to):
            await approvals.request(
                project_id, ApprovalKind.PLAN_CHANGE, to.value, requester(who), web.now()
            )
            done = "requested"
        else:
            await approvals.record_plan_change(project_id, to, requester(who), web.now())
            done = "cancelled" if to == project.plan else "scheduled"
        return web.redirect(request, who, f"{billing_url(project_id)}?done={done}")

    @router.post("/projects/{project_id}/billing/budget")
    async def set_budget(request: Request, project_id: str, who: web.SignedIn) -> Response:
        page = await web.project_page(request, who, project_id)
        data = await web.form(request, who)
        if page.role is not ProjectRole.OWNER:
            return await billing_page(
                request, who, page, error="Only the project's owners set its budget.", status=403
            )
        try:
            budget = budget_from_form(web.text(data, "budget", limit=40))
        except ValueError:
            error = f"The budget is a whole number of credits, at most {MAX_CREDITS:,}, or empty."
            return await billing_page(request, who, page, error=error, status=400)
        services = web.services(request)
        await services.store.update_project(project_id, overage_budget=budget)
        services.platform.meter.alerts_may_be_due(project_id)  # a lower budget may be near
        return web.redirect(request, who, f"{billing_url(project_id)}?done=budget")

    @router.post("/projects/{project_id}/billing/packs")
    async def buy_pack(request: Request, project_id: str, who: web.SignedIn) -> Response:
        page = await web.project_page(request, who, project_id)
        data = await web.form(request, who)
        if page.role is not ProjectRole.OWNER:
            return await billing_page(
                request, who, page, error="Only the project's owners buy credits.", status=403
            )
        pack = CREDIT_PACKS.get(web.text(data, "pack"))
        if pack is None:
            return await billing_page(request, who, page, error="Choose a pack.", status=400)
        await approvals_of(request).request(
            project_id, ApprovalKind.CREDIT_PACK, pack.name, requester(who), web.now()
        )
        return web.redirect(request, who, f"{billing_url(project_id)}?done=requested")

    return router


def billing_url(project_id: str) -> str:
    return f"{web.PREFIX}/projects/{project_id}/billing"


async def billing_page(
    request: Request,
    who: web.Viewer,
    page: web.ProjectPage,
    *,
    error: str | None = None,
    status: int = 200,
) -> Response:
    services = web.services(request)
    project = page.project
    now = web.now()
    billing = services.platform.billing
    config = billing.config_for(project)
    current = plan_of(project.plan)
    sub = project.subscription
    account = await services.store.credit_account(project.project_id)
    used = await services.platform.usage.used_since(project.project_id, sub.cycle_start)
    rate = config.overage_rate(current)
    approvals = await approvals_of(request).for_project(project.project_id, limit=50)
    invoices = sorted(
        await billing.invoices(project.project_id),
        key=lambda s: s.invoice.cycle_start,
        reverse=True,
    )
    context = {
        "page": page,
        "section": "billing",
        "project": project,
        "plan": current,
        "price": config.monthly_price(current),
        "grant": config.monthly_grant(current),
        "rate": rate,
        "sub": sub,
        "used": used,
        "overage": project.cycle_overage,
        "budget": project.overage_budget,
        "budget_alert": config.budget_alert_due(project.cycle_overage, project.overage_budget),
        "alert_percent": config.budget_alert_percent,
        "so_far": config.monthly_price(current) + project.cycle_overage * rate,
        "balance": account.balance(now),
        "lots": sorted(account.lots, key=lambda lot: lot.expires_at),
        "now": now,
        "invoices": invoices,
        "approvals": approvals,
        "people": await people(request, approvals),
        "rows": plan_rows(config),
        "waits": {p.value: plan_change_needs_approval(project.plan, p) for p in PlanName},
        "packs": CREDIT_PACKS.values(),
        "owner": page.role is ProjectRole.OWNER,
        "done": DONE.get(request.query_params.get("done", "")),
        "error": error,
        **formats(),
    }
    return web.render(request, who, "billing.html", context, status=status)
