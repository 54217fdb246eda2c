"""Webhook endpoints and events in the database: endpoints per project (CRUD, secret rotation,
disabling), and `emit`, which fans an event out to the subscribed endpoints as deliveries,
each with its delivery task, in one transaction. The delivery log lives in webhook_log.py.

Endpoint URLs are checked against the destination policy when set (public destinations only
unless the operator allows private ones). Signing secrets are sealed with the secrets box
(webhook_secrets.py): a store without one can emit events and manage endpoints, but not create
an endpoint or rotate its secret.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import orjson
from sqlalchemy import Row, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from entryway.domain.destinations import PUBLIC_ONLY, DestinationPolicy
from entryway.domain.tasks import TaskState
from entryway.domain.webhooks import (
    DELIVERY_SCHEDULE,
    DeliveryInProgressError,
    DeliveryState,
    DisabledReason,
    EndpointDisabledError,
    EventType,
    RevealedEndpoint,
    WebhookEndpoint,
    check_endpoint_url,
    event_envelope,
    new_secret,
    parse_event_types,
)
from entryway.storage.schema import tasks, webhook_deliveries, webhook_endpoints, webhook_events
from entryway.storage.secret_box import SecretBox
from entryway.storage.tasks import Clock, TaskQueue, as_utc, insert_unless_exists, utc_now
from entryway.storage.webhook_secrets import open_secret, require_box, seal_secret

DELIVERY_TASK = "webhook.deliver"


@dataclass(frozen=True, slots=True)
class QueuedDelivery:
    delivery_id: str
    endpoint_id: str
    task_id: str


@dataclass(frozen=True, slots=True)
class EmittedEvent:
    event_id: str | None  # None: no endpoint subscribes, nothing was stored
    deliveries: tuple[QueuedDelivery, ...]


def endpoint_from_row(row: Row[Any]) -> WebhookEndpoint:
    expires = row.previous_secret_expires_at
    return WebhookEndpoint(
        endpoint_id=row.endpoint_id,
        project_id=row.project_id,
        url=row.url,
        description=row.description,
        event_types=frozenset(EventType(e) for e in row.event_types.split(",") if e),
        enabled=row.enabled,
        disabled_reason=DisabledReason(row.disabled_reason) if row.disabled_reason else None,
        disabled_at=as_utc(row.disabled_at) if row.disabled_at else None,
        failure_streak=row.failure_streak,
        created_at=as_utc(row.created_at),
        updated_at=as_utc(row.updated_at),
        previous_secret_expires_at=as_utc(expires) if expires else None,
    )


def _event_types(values: Iterable[str]) -> str:
    return ",".join(sorted(e.value for e in parse_event_types(values)))


_live = webhook_endpoints.c.deleted_at.is_(None)
_UNDER_WAY = (TaskState.QUEUED.value, TaskState.RUNNING.value)


class WebhookStore:
    def __init__(
        self,
        engine: AsyncEngine,
        *,
        queue: TaskQueue | None = None,
        clock: Clock = utc_now,
        max_attempts: int = DELIVERY_SCHEDULE.max_attempts,
        destinations: DestinationPolicy = PUBLIC_ONLY,
        secrets: SecretBox | None = None,
    ) -> None:
        self.engine = engine
        self.clock = clock
        self.queue = queue or TaskQueue(engine, clock=clock)
        self.max_attempts = max_attempts
        self.destinations = destinations
        self.secrets = secrets

    # -- endpoints ------------------------------------------------------------------------

    async def create_endpoint(
        self, project_id: str, url: str, event_types: Iterable[str], description: str = ""
    ) -> RevealedEndpoint:
        """A new, enabled endpoint; its secret is shown to the project once, now."""
        now = self.clock()
        endpoint_id = str(uuid.uuid4())
        checked_url = check_endpoint_url(url, self.destinations)
        secret = new_secret()
        sealed = seal_secret(require_box(self.secrets), endpoint_id, secret)
        async with self.engine.begin() as db:
            await db.execute(
                insert(webhook_endpoints).values(
                    endpoint_id=endpoint_id,
                    project_id=project_id,
                    url=checked_url,
                    description=description,
                    event_types=_event_types(event_types),
                    secret=sealed,
                    enabled=True,
                    failure_streak=0,
                    created_at=now,
                    updated_at=now,
                )
            )
            return RevealedEndpoint(await self._get(db, endpoint_id), secret)

    async def endpoint(self, project_id: str, endpoint_id: str) -> WebhookEndpoint | None:
        """A project's endpoint; another project's, or a deleted one, is None."""
        found = await self.find_endpoint(endpoint_id)
        return found if found is not None and found.project_id == project_id else None

    async def find_endpoint(self, endpoint_id: str) -> WebhookEndpoint | None:
        async with self.engine.connect() as db:
            row = (
                await db.execute(
                    select(webhook_endpoints).where(
                        webhook_endpoints.c.endpoint_id == endpoint_id, _live
                    )
                )
            ).one_or_none()
        return None if row is None else endpoint_from_row(row)

    async def endpoints(self, project_id: str) -> list[WebhookEndpoint]:
        async with self.engine.connect() as db:
            rows = await db.execute(
                select(webhook_endpoints)
                .where(webhook_endpoints.c.project_id == project_id, _live)
                .order_by(webhook_endpoints.c.created_at)
            )
            return [endpoint_from_row(r) for r in rows]

    async def update_endpoint(
        self,
        project_id: str,
        endpoint_id: str,
        *,
        url: str | None = None,
        event_types: Iterable[str] | None = None,
        description: str | None = None,
        enabled: bool | None = None,
    ) -> WebhookEndpoint | None:
        """Change what is given. Enabling clears the reason it was disabled and its failure
        streak; disabling here is a manual disable."""
        now = self.clock()
        values: dict[str, Any] = {"updated_at": now}
        if url is not None:
            values["url"] = check_endpoint_url(url, self.destinations)
        if event_types is not None:
            values["event_types"] = _event_types(event_types)
        if description is not None:
            values["description"] = description
        if enabled is True:
            values.update(enabled=True, disabled_reason=None, disabled_at=None, failure_streak=0)
        elif enabled is False:
            values.update(enabled=False, disabled_reason=DisabledReason.MANUAL.value)
            values["disabled_at"] = now
        async with self.engine.begin() as db:
            changed = await db.execute(
                update(webhook_endpoints)
                .where(self._owned(project_id, endpoint_id))
                .values(**values)
            )
            if changed.rowcount != 1:
                return None
            return await self._get(db, endpoint_id)

    async def delete_endpoint(self, project_id: str, endpoint_id: str) -> bool:
        """Soft delete: the delivery log stays; pending deliveries are skipped."""
        now = self.clock()
        async with self.engine.begin() as db:
            result = await db.execute(
                update(webhook_endpoints)
                .where(self._owned(project_id, endpoint_id))
                .values(deleted_at=now, enabled=False, updated_at=now)
            )
        return result.rowcount == 1

    async def rotate_secret(
        self, project_id: str, endpoint_id: str, overlap: timedelta
    ) -> RevealedEndpoint | None:
        """A new secret; the old one keeps signing beside it for `overlap`, so receivers can
        switch without losing a request."""
        now = self.clock()
        box = require_box(self.secrets)
        secret = new_secret()
        async with self.engine.begin() as db:
            current = await db.scalar(
                select(webhook_endpoints.c.secret).where(self._owned(project_id, endpoint_id))
            )
            if current is None:
                return None
            keep = overlap > timedelta(0)
            # Opened and sealed again: a value in clear from an older version is sealed now.
            previous = seal_secret(box, endpoint_id, open_secret(box, endpoint_id, current))
            await db.execute(
                update(webhook_endpoints)
                .where(self._owned(project_id, endpoint_id))
                .values(
                    secret=seal_secret(box, endpoint_id, secret),
                    previous_secret=previous if keep else None,
                    previous_secret_expires_at=now + overlap if keep else None,
                    updated_at=now,
                )
            )
            return RevealedEndpoint(await self._get(db, endpoint_id), secret)

    async def disable_endpoint(self, endpoint_id: str, reason: DisabledReason) -> bool:
        """True if this call disabled it (it was enabled), so one alert is raised, not many."""
        now = self.clock()
        async with self.engine.begin() as db:
            result = await db.execute(
                update(webhook_endpoints)
                .where(webhook_endpoints.c.endpoint_id == endpoint_id, webhook_endpoints.c.enabled)
                .values(
                    enabled=False, disabled_reason=reason.value, disabled_at=now, updated_at=now
                )
            )
        return result.rowcount == 1

    # -- events ---------------------------------------------------------------------------

    async def emit(
        self,
        event_type: EventType,
        project_id: str,
        data: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
    ) -> EmittedEvent:
        """Fan an event out to the project's enabled endpoints subscribed to its type: one
        delivery and one delivery task each, committed together. With an idempotency key,
        emitting the same event again returns the first emission and queues nothing."""
        async with self.engine.begin() as db:
            if idempotency_key is not None:
                earlier = await self._emitted(db, project_id, idempotency_key)
                if earlier is not None:
                    return earlier
            rows = await db.execute(
                select(webhook_endpoints).where(webhook_endpoints.c.project_id == project_id, _live)
            )
            targets = [e for e in map(endpoint_from_row, rows) if e.receives(event_type)]
            if not targets:
                return EmittedEvent(None, ())
            return await self._fan_out(db, event_type, project_id, data, targets, idempotency_key)

    async def send_test(self, project_id: str, endpoint_id: str) -> EmittedEvent | None:
        """A `webhook.test` event to this one endpoint, whatever it subscribes to."""
        endpoint = await self.endpoint(project_id, endpoint_id)
        if endpoint is None:
            return None
        if not endpoint.enabled:
            raise EndpointDisabledError("enable the endpoint before sending it a test event")
        data = {"endpointId": endpoint_id, "message": "a test event from Entryway"}
        async with self.engine.begin() as db:
            return await self._fan_out(db, EventType.WEBHOOK_TEST, project_id, data, [endpoint])

    async def replay(self, project_id: str, delivery_id: str) -> QueuedDelivery | None:
        """Send a finished delivery again, same event and webhook-id, as a new delivery task.
        It is charged only if it was never delivered before."""
        now = self.clock()
        async with self.engine.begin() as db:
            query = (
                select(
                    webhook_deliveries,
                    webhook_endpoints.c.enabled,
                    tasks.c.state.label("task_state"),
                )
                .join(
                    webhook_endpoints,
                    webhook_endpoints.c.endpoint_id == webhook_deliveries.c.endpoint_id,
                )
                .outerjoin(tasks, tasks.c.task_id == webhook_deliveries.c.task_id)
                .where(
                    webhook_deliveries.c.delivery_id == delivery_id,
                    webhook_deliveries.c.project_id == project_id,
                )
            )
            if db.dialect.name == "postgresql":
                query = query.with_for_update(of=webhook_deliveries)
            row = (await db.execute(query)).one_or_none()
            if row is None:
                return None
            # Pending with its task queued or running: attempts are under way. (Pending with a
            # dead task: its worker died on the final attempt; that one may be replayed.)
            if row.state == DeliveryState.PENDING.value and row.task_state in _UNDER_WAY:
                raise DeliveryInProgressError("the delivery is still being attempted")
            if not row.enabled:
                raise EndpointDisabledError("enable the endpoint before replaying to it")
            replays = row.replays + 1
            task_id = await self._queue_delivery(db, delivery_id, project_id, replays)
            await db.execute(
                update(webhook_deliveries)
                .where(webhook_deliveries.c.delivery_id == delivery_id)
                .values(
                    state=DeliveryState.PENDING.value,
                    replays=replays,
                    task_id=task_id,
                    updated_at=now,
                )
            )
        return QueuedDelivery(delivery_id, row.endpoint_id, task_id)

    # -- helpers --------------------------------------------------------------------------

    def _owned(self, project_id: str, endpoint_id: str) -> Any:
        return (
            (webhook_endpoints.c.endpoint_id == endpoint_id)
            & (webhook_endpoints.c.project_id == project_id)
            & _live
        )

    async def _get(self, db: AsyncConnection, endpoint_id: str) -> WebhookEndpoint:
        query = select(webhook_endpoints).where(webhook_endpoints.c.endpoint_id == endpoint_id)
        return endpoint_from_row((await db.execute(query)).one())

    async def _emitted(
        self, db: AsyncConnection, project_id: str, idempotency_key: str
    ) -> EmittedEvent | None:
        event_id = await db.scalar(
            select(webhook_events.c.event_id).where(
                webhook_events.c.project_id == project_id,
                webhook_events.c.idempotency_key == idempotency_key,
            )
        )
        if event_id is None:
            return None
        rows = await db.execute(
            select(webhook_deliveries)
            .where(webhook_deliveries.c.event_id == event_id)
            .order_by(webhook_deliveries.c.endpoint_id)
        )
        queued = tuple(QueuedDelivery(r.delivery_id, r.endpoint_id, r.task_id) for r in rows)
        return EmittedEvent(event_id, queued)

    async def _fan_out(
        self,
        db: AsyncConnection,
        event_type: EventType,
        project_id: str,
        data: Mapping[str, Any],
        targets: list[WebhookEndpoint],
        idempotency_key: str | None = None,
    ) -> EmittedEvent:
        now = self.clock()
        event_id = "msg_" + uuid.uuid4().hex
        body = orjson.dumps(event_envelope(event_type, data, now)).decode()
        event = {
            "event_id": event_id,
            "project_id": project_id,
            "event_type": event_type.value,
            "body": body,
            "idempotency_key": idempotency_key,
            "created_at": now,
        }
        if idempotency_key is None:
            await db.execute(insert(webhook_events).values(**event))
        else:
            # A concurrent emit of the same key may have won: then its emission is the one.
            await insert_unless_exists(db, webhook_events, event, ("project_id", "idempotency_key"))
            winner = await self._emitted(db, project_id, idempotency_key)
            if winner is not None and winner.event_id != event_id:
                return winner
        queued = []
        for endpoint in sorted(targets, key=lambda e: e.endpoint_id):
            delivery_id = str(uuid.uuid4())
            await db.execute(
                insert(webhook_deliveries).values(
                    delivery_id=delivery_id,
                    event_id=event_id,
                    endpoint_id=endpoint.endpoint_id,
                    project_id=project_id,
                    state=DeliveryState.PENDING.value,
                    attempts=0,
                    replays=0,
                    created_at=now,
                    updated_at=now,
                )
            )
            task_id = await self._queue_delivery(db, delivery_id, project_id, 0)
            await db.execute(
                update(webhook_deliveries)
                .where(webhook_deliveries.c.delivery_id == delivery_id)
                .values(task_id=task_id)
            )
            queued.append(QueuedDelivery(delivery_id, endpoint.endpoint_id, task_id))
        return EmittedEvent(event_id, tuple(queued))

    async def _queue_delivery(
        self, db: AsyncConnection, delivery_id: str, project_id: str, replay: int
    ) -> str:
        return await self.queue.enqueue_in(
            db,
            DELIVERY_TASK,
            {"deliveryId": delivery_id},
            project_id=project_id,
            idempotency_key=f"{delivery_id}:{replay}",
            max_attempts=self.max_attempts,
        )
