"""Sponsorship policies: the list with what each has paid for against its caps, create,
edit, delete. The rules are checked as /v1/policies checks them (the same request model and
the same rules document), and their errors shown on the form."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import ValidationError
from starlette.datastructures import FormData

from entryway.dashboard import web
from entryway.dashboard.policy_errors import FieldError, field_error
from entryway.dashboard.policy_form import PERIODS, PolicyForm, sponsor_icon
from entryway.dashboard.webhook_pages import first_error
from entryway.domain.sponsorship import (
    Cap,
    PolicyRulesError,
    SponsorshipPolicy,
    SponsorshipRules,
    period_start,
)
from entryway.service.routes_policies import PolicyCreate
from entryway.storage.policies import PolicyStore, SqlSponsorshipUsage

NOTICES = {
    "created": "Policy created.",
    "saved": "Policy saved.",
    "deleted": "Policy deleted. What it paid for stays in the usage history.",
}


@dataclass(frozen=True, slots=True)
class CapUse:
    """One cap and what the policy has used of it in the cap's current period."""

    label: str
    unit: str
    cap: Cap
    used: int

    @property
    def high(self) -> int:
        return self.cap.limit * 4 // 5  # the meter turns to a warning past 80 %

    @property
    def percent(self) -> int:
        return 100 if self.cap.limit == 0 else min(100, self.used * 100 // self.cap.limit)

    @property
    def period(self) -> str:
        return "in all" if self.cap.period.value == "never" else f"this {self.cap.period.value}"


@dataclass(frozen=True, slots=True)
class PolicyView:
    policy: SponsorshipPolicy
    caps: list[CapUse]
    credits_paid: int  # everything it has paid for, released holds left out
    operations_paid: int


async def policy_view(
    usage: SqlSponsorshipUsage, policy: SponsorshipPolicy, project_id: str
) -> PolicyView:
    """The policy with its project-wide caps' use in their current periods, as the paymaster
    counts them when it decides (per-sender caps are counted per sender, so only listed)."""
    now = web.now()
    caps = []
    rules = policy.rules
    for label, unit, cap in (
        ("Spend cap", "credits", rules.spend_cap),
        ("Operation cap", "operations", rules.operation_cap),
    ):
        if cap is None:
            continue
        totals = await usage.totals(
            project_id, policy.policy_id, since=period_start(cap.period, now)
        )
        used = totals.credits if unit == "credits" else totals.operations
        caps.append(CapUse(label, unit, cap, used))
    overall = await usage.totals(project_id, policy.policy_id, since=None)
    return PolicyView(policy, caps, overall.credits, overall.operations)


class PolicyFormError(Exception):
    """A refused form: the field it is about (None: the whole policy) and why."""

    def __init__(self, problem: FieldError) -> None:
        super().__init__(problem.text)
        self.problem = problem


def checked(form: PolicyForm, keep_icon: str | None) -> tuple[str, SponsorshipRules]:
    """The name and rules, validated as /v1/policies validates them."""
    doc = form.rules_document(keep_icon)
    try:
        body = PolicyCreate(name=form.name, rules=doc, active=form.active)
        return body.name, SponsorshipRules.from_json(body.rules)
    except ValidationError as exc:
        raise PolicyFormError(FieldError(None, first_error(exc))) from None
    except PolicyRulesError as exc:
        raise PolicyFormError(field_error(str(exc))) from None


def problem_context(problem: FieldError | None) -> dict[str, object]:
    """A field's error goes beside it (with a pointer to it at the top); any other, on top."""
    if problem is None:
        return {"error": None, "problem": None}
    if problem.field is None:
        return {"error": problem.text, "problem": None}
    return {"error": "The policy was not saved: see the field marked below.", "problem": problem}


def posted(data: FormData) -> PolicyForm:
    return PolicyForm.read(
        lambda name: web.text(data, name, limit=60_000), lambda name: data.get(name) == "on"
    )


def routes() -> APIRouter:
    router = APIRouter()

    def store(request: Request) -> PolicyStore:
        return PolicyStore(web.services(request).store.engine)

    async def show_list(
        request: Request,
        who: web.Viewer,
        page: web.ProjectPage,
        *,
        form: PolicyForm | None = None,
        problem: FieldError | None = None,
        status: int = 200,
    ) -> Response:
        usage = SqlSponsorshipUsage(web.services(request).store.engine)
        policies = await store(request).project_policies(page.project_id)
        context = {
            "page": page,
            "section": "policies",
            "views": [await policy_view(usage, p, page.project_id) for p in policies],
            "form": form or PolicyForm(),
            "periods": PERIODS,
            **problem_context(problem),
            "notice": NOTICES.get(request.query_params.get("done", "")),
        }
        return web.render(request, who, "policies.html", context, status=status)

    async def show_edit(
        request: Request,
        who: web.Viewer,
        page: web.ProjectPage,
        policy: SponsorshipPolicy,
        *,
        form: PolicyForm | None = None,
        problem: FieldError | None = None,
        status: int = 200,
    ) -> Response:
        context = {
            "page": page,
            "section": "policies",
            "policy": policy,
            "form": form or PolicyForm.of(policy),
            "periods": PERIODS,
            **problem_context(problem),
        }
        return web.render(request, who, "policies_edit.html", context, status=status)

    async def mine(request: Request, page: web.ProjectPage, policy_id: str) -> SponsorshipPolicy:
        policy = await store(request).get(page.project_id, policy_id[:36])
        if policy is None:
            raise web.PageNotFoundError
        return policy

    def listing(request: Request, who: web.Viewer, project_id: str, done: str) -> Response:
        return web.redirect(
            request, who, f"{web.PREFIX}/projects/{project_id}/policies?done={done}"
        )

    @router.get("/projects/{project_id}/policies")
    async def policies(request: Request, project_id: str, who: web.SignedIn) -> Response:
        page = await web.project_page(request, who, project_id)
        return await show_list(request, who, page)

    @router.post("/projects/{project_id}/policies")
    async def create(request: Request, project_id: str, who: web.SignedIn) -> Response:
        page = await web.project_page(request, who, project_id)
        form = posted(await web.form(request, who))
        try:
            name, rules = checked(form, None)
        except PolicyFormError as exc:
            return await show_list(request, who, page, form=form, problem=exc.problem, status=400)
        await store(request).create(project_id, name, rules, active=form.active, at=web.now())
        return listing(request, who, project_id, "created")

    @router.get("/projects/{project_id}/policies/{policy_id}")
    async def edit(
        request: Request, project_id: str, policy_id: str, who: web.SignedIn
    ) -> Response:
        page = await web.project_page(request, who, project_id)
        return await show_edit(request, who, page, await mine(request, page, policy_id))

    @router.post("/projects/{project_id}/policies/{policy_id}")
    async def save(
        request: Request, project_id: str, policy_id: str, who: web.SignedIn
    ) -> Response:
        page = await web.project_page(request, who, project_id)
        form = posted(await web.form(request, who))
        policy = await mine(request, page, policy_id)
        try:
            name, rules = checked(form, sponsor_icon(policy.rules))
        except PolicyFormError as exc:
            return await show_edit(
                request, who, page, policy, form=form, problem=exc.problem, status=400
            )
        saved = await store(request).update(
            project_id, policy.policy_id, at=web.now(), name=name, rules=rules, active=form.active
        )
        if saved is None:
            raise web.PageNotFoundError
        return listing(request, who, project_id, "saved")

    @router.post("/projects/{project_id}/policies/{policy_id}/delete")
    async def delete(
        request: Request, project_id: str, policy_id: str, who: web.SignedIn
    ) -> Response:
        page = await web.project_page(request, who, project_id)
        await web.form(request, who)
        if not await store(request).delete(page.project_id, policy_id[:36]):
            raise web.PageNotFoundError
        return listing(request, who, project_id, "deleted")

    return router
