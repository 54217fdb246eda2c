"""The operator's pages: every project and its usage, support requests and their answers,
plans and price-book values as configured, and each chain's status with its maintenance
switch. Only the operator sees them (the operator token, or a user granted the role by
`entryway operator grant`); anyone else gets the same 404 as for a page that does not exist.
Approvals of paid changes live with billing's pages."""

from __future__ import annotations

from dataclasses import dataclass, fields

from fastapi import APIRouter, Request
from fastapi.responses import Response

from entryway.dashboard import web
from entryway.dashboard.operator_network import network_reports
from entryway.dashboard.support_pages import target_context
from entryway.domain.networks import NETWORKS
from entryway.domain.plans import MICRO_EUR_PER_EUR, PLANS, Plan
from entryway.domain.support import (
    SUPPORT_PROMISES,
    RequestStatus,
    SupportError,
    checked_answer,
)
from entryway.service.support_overdue import overdue_requests
from entryway.storage.project_directory import ListedProject, every_project
from entryway.storage.support import (
    AlreadyAnsweredError,
    SupportRequests,
    UnknownSupportRequestError,
)

MAX_REASON = 300


@dataclass(frozen=True, slots=True)
class ProjectRow:
    listed: ListedProject
    balance: int
    used_this_cycle: int


@dataclass(frozen=True, slots=True)
class PlanRow:
    plan: Plan
    monthly_micro_eur: int
    monthly_credits: int
    overage_micro_eur_per_credit: int


def euros(micro_eur: int) -> str:
    """Micro-euros as euros with cents, e.g. 5,000,000 -> "5.00"; exact, no float."""
    cents = micro_eur // (MICRO_EUR_PER_EUR // 100)
    return f"{cents // 100:,}.{cents % 100:02d}"


def answerer(who: web.Viewer) -> str:
    """Who the user is told answered: the operator user's email, or the operator token."""
    email = who.session.email if who.session is not None else None
    return email or "the operator (token sign-in)"


def routes() -> APIRouter:
    router = APIRouter(prefix="/operator")

    @router.get("")
    async def projects(request: Request, who: web.OperatorViewer) -> Response:
        services = web.services(request)
        now = web.now()
        rows = []
        for listed in await every_project(services.store.engine):
            project = listed.project
            account = await services.store.credit_account(project.project_id)
            used = await services.platform.usage.used_since(
                project.project_id, project.subscription.cycle_start
            )
            rows.append(ProjectRow(listed, account.balance(now), used))
        requests = SupportRequests(services.store.engine)
        context = {
            "rows": rows,
            "open_requests": len(await requests.queue()),
            "overdue_requests": len(
                await overdue_requests(requests, services.support_targets, now)
            ),
            "under_maintenance": sorted(await services.maintenance.windows()),
            "section": "projects",
        }
        return web.render(request, who, "operator.html", context)

    async def support_page(
        request: Request, who: web.Viewer, *, error: str | None = None, status: int = 200
    ) -> Response:
        services = web.services(request)
        requests = SupportRequests(services.store.engine)
        now = web.now()
        overdue = await overdue_requests(requests, services.support_targets, now)
        context = {
            "open": await requests.queue(),  # SLA first, then priority, then community
            "overdue": len(overdue),
            "answered": await requests.listed(RequestStatus.ANSWERED),
            "error": error,
            "done": request.query_params.get("done"),
            "section": "support",
            **target_context(request, now),
        }
        return web.render(request, who, "operator_support.html", context, status=status)

    @router.get("/support")
    async def support(request: Request, who: web.OperatorViewer) -> Response:
        return await support_page(request, who)

    @router.post("/support/{request_id}/answer")
    async def answer(request: Request, request_id: str, who: web.OperatorViewer) -> Response:
        data = await web.form(request, who)
        if not web.plausible_id(request_id):
            raise web.PageNotFoundError
        requests = SupportRequests(web.services(request).store.engine)
        try:
            text = checked_answer(web.text(data, "answer", limit=10_000))
            await requests.answer(request_id, text, web.now(), by=answerer(who))
        except UnknownSupportRequestError:
            raise web.PageNotFoundError from None
        except (SupportError, AlreadyAnsweredError) as exc:
            return await support_page(request, who, error=str(exc), status=400)
        return web.redirect(request, who, f"{web.PREFIX}/operator/support?done=answered")

    @router.get("/plans")
    async def plans(request: Request, who: web.OperatorViewer) -> Response:
        services = web.services(request)
        config = services.platform.billing.config
        rows = [
            PlanRow(
                p,
                config.monthly_price(p),
                config.monthly_grant(p),
                config.overage_rate(p),
            )
            for p in PLANS.values()
        ]
        book = services.prices
        context = {
            "rows": rows,
            "config": config,
            "fees": [
                (f.name, getattr(book, f.name))
                for f in fields(book)
                if f.name not in ("native_token_micro_eur", "extra")
            ],
            "token_prices": sorted(book.native_token_micro_eur.items()),
            "extra": sorted(book.extra.items()),
            "networks": NETWORKS,
            "euros": euros,
            "support": SUPPORT_PROMISES,
            "section": "plans",
        }
        return web.render(request, who, "operator_plans.html", context)

    async def network_page(
        request: Request, who: web.Viewer, *, error: str | None = None, status: int = 200
    ) -> Response:
        context = {
            "reports": await network_reports(web.services(request)),
            "error": error,
            "done": request.query_params.get("done"),
            "section": "network",
        }
        return web.render(request, who, "operator_network.html", context, status=status)

    @router.get("/network")
    async def network(request: Request, who: web.OperatorViewer) -> Response:
        return await network_page(request, who)

    @router.post("/network/{chain_id}/maintenance")
    async def maintenance(request: Request, chain_id: int, who: web.OperatorViewer) -> Response:
        data = await web.form(request, who)
        services = web.services(request)
        if chain_id not in services.chains:
            raise web.PageNotFoundError
        switch = services.maintenance
        if web.text(data, "state") == "on":
            reason = web.text(data, "reason", limit=MAX_REASON + 1)
            if not reason or len(reason) > MAX_REASON:
                error = f"Give a reason of 1 to {MAX_REASON} characters: callers are told it."
                return await network_page(request, who, error=error, status=400)
            await switch.begin(chain_id, reason, web.now())
            done = "on"
        else:
            if chain_id in switch.configured:
                error = (
                    f"Chain {chain_id} is under maintenance in the service's settings: "
                    "set maintenance = false there and restart to open it."
                )
                return await network_page(request, who, error=error, status=400)
            await switch.end(chain_id)
            done = "off"
        return web.redirect(request, who, f"{web.PREFIX}/operator/network?done={done}")

    return router
