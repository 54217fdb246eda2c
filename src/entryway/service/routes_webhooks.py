"""Webhook endpoints of the caller's project: create (the secret is shown once), list, read,
change, delete, rotate the secret, read the delivery log, replay a delivery, send a test event.
Another project's endpoint or delivery is 404. A URL the service may not send to (a private
address, credentials in it: entryway.domain.destinations) is 422 `webhook_url_not_allowed`."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, JsonValue
from pydantic.alias_generators import to_camel

from entryway.domain.bounds import unprintable
from entryway.domain.webhooks import (
    SUBSCRIBABLE_EVENTS,
    AttemptOutcome,
    Delivery,
    DeliveryInProgressError,
    DeliveryState,
    DisabledReason,
    EndpointDisabledError,
    EndpointNotAllowedError,
    EventType,
    InvalidEndpointError,
    RevealedEndpoint,
    WebhookEndpoint,
)
from entryway.service.auth import AdminCaller
from entryway.service.key_grants import no_store
from entryway.service.problems import Problem
from entryway.service.schemas import Flag
from entryway.service.services import Services
from entryway.storage.webhook_log import DeliveryLog
from entryway.storage.webhooks import EmittedEvent, WebhookStore

MAX_OVERLAP_SECONDS = 7 * 24 * 3600
_EVENT_NAMES: list[JsonValue] = [e.value for e in sorted(SUBSCRIBABLE_EVENTS)]
_EVENT_ITEMS: dict[str, JsonValue] = {"items": {"type": "string", "enum": _EVENT_NAMES}}


def _printable(text: str) -> str:
    bad = unprintable(text, multiline=True)
    if bad is not None:
        raise ValueError(f"holds a control or invisible character ({bad})")
    return text


# A `Description` (lines and tabs, no other control or invisible character), shorter: the
# dashboard shows it in the endpoint list.
EndpointDescription = Annotated[str, Field(max_length=200), AfterValidator(_printable)]
OverlapSeconds = Annotated[int, Field(strict=True, ge=0, le=MAX_OVERLAP_SECONDS)]


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class _Body(_Model):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class EndpointCreate(_Body):
    url: str = Field(
        description="absolute http(s) URL receiving POSTed events: a public address, no "
        "credentials in it (unless the operator allows private destinations)"
    )
    event_types: list[str] = Field(json_schema_extra=_EVENT_ITEMS)
    description: EndpointDescription = ""


class EndpointUpdate(_Body):
    url: str | None = None
    event_types: list[str] | None = Field(default=None, json_schema_extra=_EVENT_ITEMS)
    description: EndpointDescription | None = None
    enabled: Flag | None = Field(default=None, description="true re-enables a disabled endpoint")


class EndpointOut(_Model):
    id: str
    url: str
    description: str
    event_types: list[EventType]
    enabled: bool
    disabled_reason: DisabledReason | None
    disabled_at: datetime | None
    failure_streak: int = Field(description="failed attempts since the last success")
    previous_secret_expires_at: datetime | None = Field(
        description="until when the secret replaced by the last rotation still signs"
    )
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, e: WebhookEndpoint) -> EndpointOut:
        return cls(
            id=e.endpoint_id,
            url=e.url,
            description=e.description,
            event_types=sorted(e.event_types),
            enabled=e.enabled,
            disabled_reason=e.disabled_reason,
            disabled_at=e.disabled_at,
            failure_streak=e.failure_streak,
            previous_secret_expires_at=e.previous_secret_expires_at,
            created_at=e.created_at,
            updated_at=e.updated_at,
        )


class EndpointWithSecret(EndpointOut):
    secret: str = Field(description="whsec_…: shown now only; verify signatures with it")

    @classmethod
    def revealing(cls, revealed: RevealedEndpoint) -> EndpointWithSecret:
        return cls(**EndpointOut.of(revealed.endpoint).model_dump(), secret=revealed.secret)


class EndpointList(_Model):
    endpoints: list[EndpointOut]


class SecretRotation(_Body):
    overlap_seconds: OverlapSeconds = Field(
        default=24 * 3600,
        description="how long the old secret keeps signing beside the new one: 0 to 604800 "
        "seconds (7 days), a JSON integer",
    )


class AttemptOut(_Model):
    number: int
    started_at: datetime
    finished_at: datetime | None
    duration_ms: int | None
    status_code: int | None
    error: str | None
    outcome: AttemptOutcome


class DeliveryOut(_Model):
    id: str
    event_id: str = Field(description="the webhook-id header")
    event_type: str
    endpoint_id: str
    state: DeliveryState
    replays: int
    task_id: str | None
    created_at: datetime
    delivered_at: datetime | None
    attempts: list[AttemptOut]

    @classmethod
    def of(cls, d: Delivery) -> DeliveryOut:
        return cls(
            id=d.delivery_id,
            event_id=d.event_id,
            event_type=d.event_type,
            endpoint_id=d.endpoint_id,
            state=d.state,
            replays=d.replays,
            task_id=d.task_id,
            created_at=d.created_at,
            delivered_at=d.delivered_at,
            attempts=[AttemptOut.model_validate(a, from_attributes=True) for a in d.log],
        )


class DeliveryLogOut(_Model):
    endpoint_id: str
    deliveries: list[DeliveryOut]


class QueuedDeliveryOut(_Model):
    delivery_id: str
    event_id: str | None = None
    task_id: str = Field(description="follow it at /task-status?id=")


class EventTypeList(_Model):
    event_types: list[EventType]


def _not_found(endpoint_id: str) -> Problem:
    return Problem(
        404,
        "webhook_endpoint_not_found",
        "Webhook endpoint not found",
        f"no endpoint {endpoint_id}",
    )


def _invalid(exc: InvalidEndpointError) -> Problem:
    if isinstance(exc, EndpointNotAllowedError):
        return Problem(422, "webhook_url_not_allowed", "Webhook URL not allowed", str(exc))
    return Problem(422, "validation_error", "Invalid webhook endpoint", str(exc))


def _disabled(exc: EndpointDisabledError) -> Problem:
    return Problem(409, "webhook_endpoint_disabled", "Webhook endpoint disabled", str(exc))


def _webhooks(request: Request) -> WebhookStore:
    services: Services = request.app.state.services
    return WebhookStore(
        services.store.engine,
        destinations=services.webhook_destinations,
        secrets=services.webhook_secrets,
    )


def _only(emitted: EmittedEvent) -> QueuedDeliveryOut:
    queued = emitted.deliveries[0]
    return QueuedDeliveryOut(
        delivery_id=queued.delivery_id, event_id=emitted.event_id, task_id=queued.task_id
    )


def webhook_routes() -> APIRouter:
    router = APIRouter(prefix="/v1/webhooks", tags=["webhooks"])

    @router.get("/event-types", operation_id="listWebhookEventTypes")
    async def event_types(who: AdminCaller) -> EventTypeList:
        """The events an endpoint can subscribe to."""
        return EventTypeList(event_types=sorted(SUBSCRIBABLE_EVENTS))

    @router.post("/endpoints", status_code=201, operation_id="createWebhookEndpoint")
    async def create(
        request: Request, response: Response, who: AdminCaller, body: EndpointCreate
    ) -> EndpointWithSecret:
        """A new endpoint. The response carries its signing secret, never shown again (and
        is never cached)."""
        try:
            created = await _webhooks(request).create_endpoint(
                who.project_id, body.url, body.event_types, body.description
            )
        except InvalidEndpointError as exc:
            raise _invalid(exc) from None
        no_store(response)
        return EndpointWithSecret.revealing(created)

    @router.get("/endpoints", operation_id="listWebhookEndpoints")
    async def list_endpoints(request: Request, who: AdminCaller) -> EndpointList:
        endpoints = await _webhooks(request).endpoints(who.project_id)
        return EndpointList(endpoints=[EndpointOut.of(e) for e in endpoints])

    @router.get("/endpoints/{endpoint_id}", operation_id="getWebhookEndpoint")
    async def get_endpoint(request: Request, who: AdminCaller, endpoint_id: str) -> EndpointOut:
        endpoint = await _webhooks(request).endpoint(who.project_id, endpoint_id)
        if endpoint is None:
            raise _not_found(endpoint_id)
        return EndpointOut.of(endpoint)

    @router.patch("/endpoints/{endpoint_id}", operation_id="updateWebhookEndpoint")
    async def update_endpoint(
        request: Request, who: AdminCaller, endpoint_id: str, body: EndpointUpdate
    ) -> EndpointOut:
        """Change the URL, event types, description, or enable/disable it."""
        try:
            endpoint = await _webhooks(request).update_endpoint(
                who.project_id,
                endpoint_id,
                url=body.url,
                event_types=body.event_types,
                description=body.description,
                enabled=body.enabled,
            )
        except InvalidEndpointError as exc:
            raise _invalid(exc) from None
        if endpoint is None:
            raise _not_found(endpoint_id)
        return EndpointOut.of(endpoint)

    @router.delete(
        "/endpoints/{endpoint_id}", status_code=204, operation_id="deleteWebhookEndpoint"
    )
    async def delete_endpoint(request: Request, who: AdminCaller, endpoint_id: str) -> Response:
        if not await _webhooks(request).delete_endpoint(who.project_id, endpoint_id):
            raise _not_found(endpoint_id)
        return Response(status_code=204)

    @router.post("/endpoints/{endpoint_id}/rotate-secret", operation_id="rotateWebhookSecret")
    async def rotate_secret(
        request: Request,
        response: Response,
        who: AdminCaller,
        endpoint_id: str,
        body: SecretRotation | None = None,
    ) -> EndpointWithSecret:
        """A new secret, shown once (and never cached); the old one keeps signing for
        `overlapSeconds`."""
        overlap = timedelta(seconds=(body or SecretRotation()).overlap_seconds)
        rotated = await _webhooks(request).rotate_secret(who.project_id, endpoint_id, overlap)
        if rotated is None:
            raise _not_found(endpoint_id)
        no_store(response)
        return EndpointWithSecret.revealing(rotated)

    @router.get("/endpoints/{endpoint_id}/deliveries", operation_id="listWebhookDeliveries")
    async def deliveries(
        request: Request,
        who: AdminCaller,
        endpoint_id: str,
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
    ) -> DeliveryLogOut:
        """The delivery log: deliveries newest first, each with every attempt (when, status
        code or error, duration)."""
        webhooks = _webhooks(request)
        if await webhooks.endpoint(who.project_id, endpoint_id) is None:
            raise _not_found(endpoint_id)
        history = await DeliveryLog(webhooks.engine).history(
            who.project_id, endpoint_id, limit=limit
        )
        return DeliveryLogOut(
            endpoint_id=endpoint_id, deliveries=[DeliveryOut.of(d) for d in history]
        )

    @router.post(
        "/deliveries/{delivery_id}/replay", status_code=202, operation_id="replayWebhookDelivery"
    )
    async def replay(request: Request, who: AdminCaller, delivery_id: str) -> QueuedDeliveryOut:
        """Send a finished delivery again (same webhook-id), on a new delivery task."""
        try:
            queued = await _webhooks(request).replay(who.project_id, delivery_id)
        except DeliveryInProgressError as exc:
            raise Problem(
                409, "webhook_delivery_in_progress", "Delivery in progress", str(exc)
            ) from None
        except EndpointDisabledError as exc:
            raise _disabled(exc) from None
        if queued is None:
            raise Problem(
                404,
                "webhook_delivery_not_found",
                "Delivery not found",
                f"no delivery {delivery_id}",
            )
        return QueuedDeliveryOut(delivery_id=queued.delivery_id, task_id=queued.task_id)

    @router.post(
        "/endpoints/{endpoint_id}/test", status_code=202, operation_id="sendWebhookTestEvent"
    )
    async def send_test(request: Request, who: AdminCaller, endpoint_id: str) -> QueuedDeliveryOut:
        """Queue a `webhook.test` event to this endpoint (charged as any delivery)."""
        try:
            emitted = await _webhooks(request).send_test(who.project_id, endpoint_id)
        except EndpointDisabledError as exc:
            raise _disabled(exc) from None
        if emitted is None:
            raise _not_found(endpoint_id)
        return _only(emitted)

    return router
