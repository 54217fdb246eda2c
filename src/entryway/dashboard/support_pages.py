"""Support requests, with the plan's support level and the additional-network form: a user
files a request about one of their projects (or none) and reads the operator's answers. Each
user sees only their own requests.

A request is owed its project's support level (or, about no particular project, the best
level among the author's projects) and shows that level's response target, when the answer
is due, and on the answer who gave it and when."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.datastructures import FormData

from entryway.dashboard import web
from entryway.domain.networks import NETWORKS, PROVIDER_REQUIREMENTS
from entryway.domain.plans import SupportLevel
from entryway.domain.plans import plan as plan_of
from entryway.domain.support import (
    LEVEL_LABELS,
    SupportError,
    SupportTopic,
    checked_message,
    level_for,
    network_request,
    support_promise,
)
from entryway.storage.store import Project
from entryway.storage.support import SupportRequests, UnknownSupportRequestError

NETWORK_FIELDS = ("chain_name", "mainnet_chain_id", "testnet_chain_id", "use_case")


@dataclass(frozen=True, slots=True)
class ProjectChoice:
    project: Project
    promise: str  # e.g. "FREE: community support"
    level: SupportLevel


def requests_of(request: Request) -> SupportRequests:
    return SupportRequests(web.services(request).store.engine)


async def project_choices(request: Request, who: web.Viewer) -> list[ProjectChoice]:
    """The viewer's own projects (not every project, even for an operator user)."""
    if who.user_id is None:
        return []
    store = web.services(request).store
    ids = await web.accounts(request).project_ids(who.user_id)
    projects = [await store.project(project_id) for project_id in ids]
    return [ProjectChoice(p, support_promise(p.plan), plan_of(p.plan).support) for p in projects]


def target_context(request: Request, now: datetime | None = None) -> dict[str, Any]:
    """What support_request.html reads to show a request's target and whether it is late."""
    return {
        "targets": web.services(request).support_targets,
        "now": now or web.now(),
        "level_labels": LEVEL_LABELS,
    }


def filed_details(data: FormData, topic: SupportTopic) -> dict[str, Any] | None:
    """The additional-network fields, when technical support names a network: every field
    then, the chain ids as positive integers, and the methods its RPC provider must offer."""
    given = {name: web.text(data, name) for name in NETWORK_FIELDS}
    if topic is not SupportTopic.TECHNICAL or not any(given.values()):
        return None
    # What its RPC provider must offer goes with the request: the operator answers knowing
    # the author was told, and the author keeps the list with the request.
    must_offer = [method for method, _why in PROVIDER_REQUIREMENTS]
    return {**network_request(**given).as_details(), "provider_must_offer": must_offer}


def routes() -> APIRouter:
    router = APIRouter()

    async def support_page(
        request: Request,
        who: web.Viewer,
        *,
        error: str | None = None,
        form: dict[str, str] | None = None,
        status: int = 200,
    ) -> Response:
        context = {
            "choices": await project_choices(request, who),
            "topics": list(SupportTopic),
            "requests": []
            if who.user_id is None
            else await requests_of(request).of_user(who.user_id),
            "form": form or {"topic": request.query_params.get("topic", "")},
            "error": error,
            "done": request.query_params.get("done"),
            "networks": list(NETWORKS.values()),
            "provider_requirements": PROVIDER_REQUIREMENTS,
            **target_context(request),
        }
        return web.render(request, who, "support.html", context, status=status)

    @router.get("/support")
    async def support(request: Request, who: web.SignedIn) -> Response:
        return await support_page(request, who)

    @router.post("/support")
    async def file_request(request: Request, who: web.SignedIn) -> Response:
        data = await web.form(request, who)
        form = {name: web.text(data, name) for name in ("project_id", "topic", "message")}
        form.update({name: web.text(data, name) for name in NETWORK_FIELDS})
        try:
            if who.user_id is None:
                raise SupportError("Sign in as a user to file a support request.")
            project_id = form["project_id"] or None
            if project_id is not None and not await _is_member(request, who.user_id, project_id):
                raise SupportError("Choose one of your projects, or none.")
            try:
                topic = SupportTopic(form["topic"])
            except ValueError:
                raise SupportError("Choose a topic from the list.") from None
            message = checked_message(web.text(data, "message", limit=10_000))
            details = filed_details(data, topic)
        except SupportError as exc:
            return await support_page(request, who, error=str(exc), form=form, status=400)
        choices = await project_choices(request, who)
        owed = level_for(
            c.project.plan for c in choices if project_id in (None, c.project.project_id)
        )  # the plan's level now; a later plan change leaves the request's level as filed
        filed = await requests_of(request).file(
            who.user_id, project_id, topic, message, details, web.now(), level=owed
        )
        return web.redirect(request, who, f"{web.PREFIX}/support/{filed}?done=filed")

    @router.get("/support/{request_id}")
    async def support_request(request: Request, request_id: str, who: web.SignedIn) -> Response:
        """One request as its author sees it (anyone else: the 404 of a missing page)."""
        if not web.plausible_id(request_id) or who.user_id is None:
            raise web.PageNotFoundError
        try:
            found = await requests_of(request).get(request_id)
        except UnknownSupportRequestError:
            raise web.PageNotFoundError from None
        if found.user_id != who.user_id:
            raise web.PageNotFoundError
        context = {
            "r": found,
            "done": request.query_params.get("done"),
            **target_context(request),
        }
        return web.render(request, who, "support_request_page.html", context)

    return router


async def _is_member(request: Request, user_id: str, project_id: str) -> bool:
    if not web.plausible_id(project_id):
        return False
    return await web.accounts(request).role(project_id, user_id) is not None
