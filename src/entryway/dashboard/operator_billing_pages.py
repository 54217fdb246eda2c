"""The operator's side of billing: paid plan changes and credit packs waiting for approval
(approve or reject, with a note), the recent decisions, and a project's own ENTERPRISE price
and monthly credits."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from fastapi import APIRouter, Request
from fastapi.responses import Response

from entryway.dashboard import web
from entryway.dashboard.euros import euros
from entryway.domain.approvals import Approval, ApprovalStatus
from entryway.domain.billing import EnterpriseTerms
from entryway.domain.bounds import MAX_CREDITS
from entryway.domain.credits import CreditError
from entryway.domain.plans import MICRO_EUR_PER_EUR
from entryway.storage.approvals import Approvals, UnknownApprovalError
from entryway.storage.store import Project, UnknownError

RECENT = 50
MAX_NOTE = 500
DONE = {
    "approved": "Approved.",
    "rejected": "Rejected.",
    "decided": "That request was decided before; nothing changed.",
    "terms": "ENTERPRISE terms saved. The next cycle close invoices and grants by them.",
}


class TermsError(Exception):
    """A value of the ENTERPRISE terms form that cannot be taken."""


def micro_eur_of(text: str) -> int | None:
    """Euros typed in a form (e.g. "1500" or "1,500.50") as micro-euros; blank: None."""
    cleaned = text.replace(",", "").replace(" ", "")
    if not cleaned:
        return None
    try:
        amount = Decimal(cleaned)
    except InvalidOperation:
        raise TermsError("Give the monthly price in euros, e.g. 1500 or 1500.50.") from None
    if not amount.is_finite() or amount < 0:
        raise TermsError("Give the monthly price as euros, zero or more.")
    micro = amount * MICRO_EUR_PER_EUR
    if micro != micro.to_integral_value():
        raise TermsError("Give the monthly price in euros, at most six decimals.")
    if micro > MAX_CREDITS:
        raise TermsError("That monthly price is too large.")
    return int(micro)


def credits_of(text: str) -> int | None:
    cleaned = text.replace(",", "").replace(" ", "").replace("_", "")
    if not cleaned:
        return None
    if not cleaned.isascii() or not cleaned.isdigit() or int(cleaned) > MAX_CREDITS:
        raise TermsError(f"Give the monthly credits as a whole number up to {MAX_CREDITS:,}.")
    return int(cleaned)


async def people(request: Request, approvals: list[Approval]) -> dict[str, str]:
    """Who asked or decided, as the pages show them: a user by their email, a key by its id,
    the operator as such."""
    accounts = web.accounts(request)
    shown: dict[str, str] = {"operator": "the operator"}
    for a in approvals:
        for who in (a.requested_by, a.decided_by):
            if who is None or who in shown:
                continue
            kind, _, ident = who.partition(":")
            user = await accounts.user(ident) if kind == "user" else None
            shown[who] = user.email if user else who.replace("key:", "API key ")
    return shown


def routes() -> APIRouter:
    router = APIRouter(prefix="/operator")

    @router.get("/approvals")
    async def approvals_page(request: Request, who: web.OperatorViewer) -> Response:
        return await _approvals_page(request, who)

    @router.post("/approvals/{approval_id}/{decision}")
    async def decide(
        request: Request, approval_id: str, decision: str, who: web.OperatorViewer
    ) -> Response:
        data = await web.form(request, who)
        if decision not in ("approve", "reject") or not web.plausible_id(approval_id):
            raise web.PageNotFoundError
        store = web.services(request).store
        try:
            outcome = await Approvals(store.engine, store.ledger).decide(
                approval_id,
                approve=decision == "approve",
                decided_by=f"user:{who.user_id}" if who.user_id else "operator",
                at=web.now(),
                note=web.text(data, "note", limit=MAX_NOTE) or None,
            )
        except UnknownApprovalError:
            raise web.PageNotFoundError from None
        done = outcome.approval.status.value if outcome.applied else "decided"
        return web.redirect(request, who, f"{web.PREFIX}/operator/approvals?done={done}")

    @router.get("/projects/{project_id}/enterprise")
    async def terms_page(request: Request, project_id: str, who: web.OperatorViewer) -> Response:
        return await _terms_page(request, who, await _project(request, project_id))

    @router.post("/projects/{project_id}/enterprise")
    async def save_terms(request: Request, project_id: str, who: web.OperatorViewer) -> Response:
        project = await _project(request, project_id)
        data = await web.form(request, who)
        price_text = web.text(data, "price_eur", limit=40)
        credits_text = web.text(data, "credits", limit=40)
        try:
            terms = EnterpriseTerms(micro_eur_of(price_text), credits_of(credits_text))
        except (TermsError, CreditError) as exc:
            form = {"price_eur": price_text, "credits": credits_text}
            return await _terms_page(request, who, project, error=str(exc), form=form, status=400)
        await web.services(request).platform.billing.set_enterprise_terms(project_id, terms)
        url = f"{web.PREFIX}/operator/projects/{project_id}/enterprise?done=terms"
        return web.redirect(request, who, url)

    return router


async def _project(request: Request, project_id: str) -> Project:
    if not web.plausible_id(project_id):
        raise web.PageNotFoundError
    try:
        return await web.services(request).store.project(project_id)
    except UnknownError:
        raise web.PageNotFoundError from None


async def _approvals_page(request: Request, who: web.Viewer) -> Response:
    store = web.services(request).store
    approvals = Approvals(store.engine, store.ledger)
    pending = await approvals.with_status(ApprovalStatus.PENDING)
    decided: list[Approval] = sorted(
        await approvals.with_status(ApprovalStatus.APPROVED, RECENT)
        + await approvals.with_status(ApprovalStatus.REJECTED, RECENT)
        # An approval the project undid before it took effect: the operator sees that too.
        + await approvals.with_status(ApprovalStatus.CANCELLED, RECENT),
        key=lambda a: a.decided_at or a.requested_at,
        reverse=True,
    )[:RECENT]
    names: dict[str, Project] = {}
    for a in pending + decided:
        if a.project_id not in names:
            names[a.project_id] = await store.project(a.project_id)
    context = {
        "pending": pending,
        "decided": decided,
        "projects": names,
        "people": await people(request, pending + decided),
        "section": "approvals",
        "done": DONE.get(request.query_params.get("done", "")),
        "euros": euros,
    }
    return web.render(request, who, "approvals.html", context)


async def _terms_page(
    request: Request,
    who: web.Viewer,
    project: Project,
    *,
    error: str | None = None,
    form: dict[str, str] | None = None,
    status: int = 200,
) -> Response:
    config = web.services(request).platform.billing.config
    terms = project.enterprise_terms
    if form is None:
        price = terms.monthly_micro_eur
        form = {
            "price_eur": "" if price is None else euros(price).replace(",", ""),
            "credits": "" if terms.monthly_credits is None else str(terms.monthly_credits),
        }
    context = {
        "project": project,
        "terms": terms,
        "config": config,
        "form": form,
        "error": error,
        "section": "approvals",
        "done": DONE.get(request.query_params.get("done", "")),
        "euros": euros,
    }
    return web.render(request, who, "billing_enterprise.html", context, status=status)
