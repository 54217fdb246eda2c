"""Webhooks: a project's endpoints (create, with the signing secret shown once; enable,
disable, rotate the secret, send a test event, delete), each with its delivery log and a
replay button. Every change goes through the same store and checks as /v1/webhooks."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import ValidationError

from entryway.dashboard import web
from entryway.domain.webhooks import (
    DELIVERY_SCHEDULE,
    SUBSCRIBABLE_EVENTS,
    DeliveryInProgressError,
    EndpointDisabledError,
    InvalidEndpointError,
    RevealedEndpoint,
)
from entryway.service.routes_webhooks import EndpointCreate
from entryway.storage.webhook_log import DeliveryLog
from entryway.storage.webhooks import WebhookStore

DELIVERIES_SHOWN = 10
ROTATION_OVERLAP = timedelta(hours=24)  # the REST default: the old secret signs a day more
NOTICES = {
    "enabled": "Endpoint enabled.",
    "disabled": "Endpoint disabled: no new deliveries go to it until you enable it.",
    "deleted": "Endpoint deleted. Its delivery log is kept.",
    "tested": "Test event queued: its delivery shows in the log below within seconds.",
    "replayed": "Replay queued: the delivery is sent again with the same webhook-id.",
}


def first_error(exc: ValidationError) -> str:
    """A form's first invalid field, said plainly."""
    error = exc.errors()[0]
    field = ".".join(str(p) for p in error["loc"]) or "form"
    return f"{field}: {error['msg']}"


def wait_text(seconds: float) -> str:
    for unit, size in (("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)} {unit}"
    return f"{seconds:g} s"


def webhook_store(request: Request) -> WebhookStore:
    services = web.services(request)
    return WebhookStore(
        services.store.engine,
        destinations=services.webhook_destinations,
        secrets=services.webhook_secrets,
    )


def routes() -> APIRouter:
    router = APIRouter()

    async def show(
        request: Request,
        who: web.Viewer,
        page: web.ProjectPage,
        *,
        error: str | None = None,
        revealed: RevealedEndpoint | None = None,
        form: dict[str, Any] | None = None,
        status: int = 200,
    ) -> Response:
        store = webhook_store(request)
        log = DeliveryLog(store.engine)
        endpoints = await store.endpoints(page.project_id)
        deliveries = {
            e.endpoint_id: await log.history(page.project_id, e.endpoint_id, limit=DELIVERIES_SHOWN)
            for e in endpoints
        }
        context = {
            "page": page,
            "section": "webhooks",
            "endpoints": endpoints,
            "deliveries": deliveries,
            "event_types": sorted(e.value for e in SUBSCRIBABLE_EVENTS),
            "revealed": revealed,
            "form": form or {"url": "", "description": "", "event_types": []},
            "error": error,
            "notice": NOTICES.get(request.query_params.get("done", "")),
            "can_sign": web.services(request).webhook_secrets is not None,
            "retries": ", ".join(wait_text(d) for d in DELIVERY_SCHEDULE.delays),
        }
        response = web.render(request, who, "webhooks.html", context, status=status)
        if revealed is not None:
            response.headers["Cache-Control"] = "no-store"  # the secret is in this page only
        return response

    def back(request: Request, who: web.Viewer, project_id: str, done: str) -> Response:
        return web.redirect(
            request, who, f"{web.PREFIX}/projects/{project_id}/webhooks?done={done}"
        )

    @router.get("/projects/{project_id}/webhooks")
    async def webhooks(request: Request, project_id: str, who: web.SignedIn) -> Response:
        page = await web.project_page(request, who, project_id)
        return await show(request, who, page)

    @router.post("/projects/{project_id}/webhooks")
    async def create(request: Request, project_id: str, who: web.SignedIn) -> Response:
        page = await web.project_page(request, who, project_id)
        data = await web.form(request, who)
        chosen = [str(v) for v in data.getlist("event_types")][: len(SUBSCRIBABLE_EVENTS) + 1]
        url = web.text(data, "url", limit=2100)
        description = web.text(data, "description", limit=400)
        form = {"url": url, "description": description, "event_types": chosen}
        try:
            body = EndpointCreate(url=url, event_types=chosen, description=description)
            created = await webhook_store(request).create_endpoint(
                project_id, body.url, body.event_types, body.description
            )
        except ValidationError as exc:
            return await show(request, who, page, error=first_error(exc), form=form, status=400)
        except InvalidEndpointError as exc:
            return await show(request, who, page, error=str(exc), form=form, status=400)
        return await show(request, who, page, revealed=created)

    @router.post("/projects/{project_id}/webhooks/{endpoint_id}/enable")
    async def enable(
        request: Request, project_id: str, endpoint_id: str, who: web.SignedIn
    ) -> Response:
        return await switch(request, project_id, endpoint_id, who, enabled=True)

    @router.post("/projects/{project_id}/webhooks/{endpoint_id}/disable")
    async def disable(
        request: Request, project_id: str, endpoint_id: str, who: web.SignedIn
    ) -> Response:
        return await switch(request, project_id, endpoint_id, who, enabled=False)

    async def switch(
        request: Request, project_id: str, endpoint_id: str, who: web.Viewer, *, enabled: bool
    ) -> Response:
        await web.project_page(request, who, project_id)
        await web.form(request, who)
        changed = await webhook_store(request).update_endpoint(
            project_id, endpoint_id[:36], enabled=enabled
        )
        if changed is None:
            raise web.PageNotFoundError
        return back(request, who, project_id, "enabled" if enabled else "disabled")

    @router.post("/projects/{project_id}/webhooks/{endpoint_id}/delete")
    async def delete(
        request: Request, project_id: str, endpoint_id: str, who: web.SignedIn
    ) -> Response:
        await web.project_page(request, who, project_id)
        await web.form(request, who)
        if not await webhook_store(request).delete_endpoint(project_id, endpoint_id[:36]):
            raise web.PageNotFoundError
        return back(request, who, project_id, "deleted")

    @router.post("/projects/{project_id}/webhooks/{endpoint_id}/rotate")
    async def rotate(
        request: Request, project_id: str, endpoint_id: str, who: web.SignedIn
    ) -> Response:
        page = await web.project_page(request, who, project_id)
        await web.form(request, who)
        rotated = await webhook_store(request).rotate_secret(
            project_id, endpoint_id[:36], ROTATION_OVERLAP
        )
        if rotated is None:
            raise web.PageNotFoundError
        return await show(request, who, page, revealed=rotated)

    @router.post("/projects/{project_id}/webhooks/{endpoint_id}/test")
    async def send_test(
        request: Request, project_id: str, endpoint_id: str, who: web.SignedIn
    ) -> Response:
        page = await web.project_page(request, who, project_id)
        await web.form(request, who)
        try:
            emitted = await webhook_store(request).send_test(project_id, endpoint_id[:36])
        except EndpointDisabledError as exc:
            return await show(request, who, page, error=str(exc).capitalize() + ".", status=409)
        if emitted is None:
            raise web.PageNotFoundError
        return back(request, who, project_id, "tested")

    @router.post("/projects/{project_id}/webhooks/deliveries/{delivery_id}/replay")
    async def replay(
        request: Request, project_id: str, delivery_id: str, who: web.SignedIn
    ) -> Response:
        page = await web.project_page(request, who, project_id)
        await web.form(request, who)
        try:
            queued = await webhook_store(request).replay(project_id, delivery_id[:36])
        except (DeliveryInProgressError, EndpointDisabledError) as exc:
            message = f"Not replayed: {exc}."
            return await show(request, who, page, error=message, status=409)
        if queued is None:
            raise web.PageNotFoundError
        return back(request, who, project_id, "replayed")

    return router
