"""The delivery log: what the delivery handler reads and writes around each attempt, and the
per-endpoint history the API shows (every attempt: when, status code or error, how long).
Reading a delivery's target opens its endpoint's signing secrets, so it needs the secrets box;
the history does not."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Row, insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.webhooks import (
    AttemptOutcome,
    Delivery,
    DeliveryAttempt,
    DeliveryState,
    SigningSecrets,
    WebhookEndpoint,
)
from entryway.storage.schema import (
    webhook_attempts,
    webhook_deliveries,
    webhook_endpoints,
    webhook_events,
)
from entryway.storage.secret_box import SecretBox
from entryway.storage.tasks import Clock, as_utc, utc_now
from entryway.storage.webhook_secrets import require_box, signing_secrets
from entryway.storage.webhooks import endpoint_from_row

INTERRUPTED = "the worker stopped before the attempt finished"


@dataclass(frozen=True, slots=True)
class DeliveryTarget:
    """Everything one attempt needs: the delivery, the exact body, where it goes, and the
    secrets that sign it."""

    delivery: Delivery
    body: bytes
    endpoint: WebhookEndpoint
    endpoint_deleted: bool
    secrets: SigningSecrets


def _attempt(row: Row[Any]) -> DeliveryAttempt:
    return DeliveryAttempt(
        attempt_id=row.attempt_id,
        number=row.number,
        started_at=as_utc(row.started_at),
        finished_at=as_utc(row.finished_at) if row.finished_at else None,
        duration_ms=row.duration_ms,
        status_code=row.status_code,
        error=row.error,
        outcome=AttemptOutcome(row.outcome),
    )


def _delivery(row: Row[Any], log: tuple[DeliveryAttempt, ...] = ()) -> Delivery:
    return Delivery(
        delivery_id=row.delivery_id,
        event_id=row.event_id,
        event_type=row.event_type,
        endpoint_id=row.endpoint_id,
        project_id=row.project_id,
        state=DeliveryState(row.state),
        attempts=row.attempts,
        replays=row.replays,
        task_id=row.task_id,
        created_at=as_utc(row.created_at),
        delivered_at=as_utc(row.delivered_at) if row.delivered_at else None,
        log=log,
    )


_with_event = webhook_deliveries.join(
    webhook_events, webhook_events.c.event_id == webhook_deliveries.c.event_id
)


class DeliveryLog:
    def __init__(
        self, engine: AsyncEngine, *, clock: Clock = utc_now, secrets: SecretBox | None = None
    ) -> None:
        self.engine = engine
        self.clock = clock
        self.secrets = secrets

    async def target(self, delivery_id: str) -> DeliveryTarget | None:
        box = require_box(self.secrets)
        async with self.engine.connect() as db:
            row = (
                await db.execute(
                    select(webhook_deliveries, webhook_events.c.event_type, webhook_events.c.body)
                    .select_from(_with_event)
                    .where(webhook_deliveries.c.delivery_id == delivery_id)
                )
            ).one_or_none()
            if row is None:
                return None
            endpoint = (
                await db.execute(
                    select(webhook_endpoints).where(
                        webhook_endpoints.c.endpoint_id == row.endpoint_id
                    )
                )
            ).one()
        return DeliveryTarget(
            _delivery(row),
            row.body.encode(),
            endpoint_from_row(endpoint),
            endpoint.deleted_at is not None,
            signing_secrets(box, endpoint),
        )

    async def start_attempt(self, delivery_id: str) -> DeliveryAttempt:
        """Log an attempt as in flight before sending, so a worker that dies mid-request still
        leaves a trace; an earlier attempt still in flight is marked interrupted (the caller
        holds the delivery's task lease, so no other attempt can be running)."""
        now = self.clock()
        async with self.engine.begin() as db:
            await db.execute(
                update(webhook_attempts)
                .where(
                    webhook_attempts.c.delivery_id == delivery_id,
                    webhook_attempts.c.outcome == AttemptOutcome.IN_FLIGHT.value,
                )
                .values(outcome=AttemptOutcome.INTERRUPTED.value, error=INTERRUPTED)
            )
            count = await db.scalar(
                select(webhook_deliveries.c.attempts).where(
                    webhook_deliveries.c.delivery_id == delivery_id
                )
            )
            number = int(count or 0) + 1
            await db.execute(
                update(webhook_deliveries)
                .where(webhook_deliveries.c.delivery_id == delivery_id)
                .values(attempts=number, updated_at=now)
            )
            attempt = DeliveryAttempt(
                str(uuid.uuid4()), number, now, None, None, None, None, AttemptOutcome.IN_FLIGHT
            )
            await db.execute(
                insert(webhook_attempts).values(
                    attempt_id=attempt.attempt_id,
                    delivery_id=delivery_id,
                    number=number,
                    started_at=now,
                    outcome=attempt.outcome.value,
                )
            )
        return attempt

    async def finish_attempt(
        self,
        target: DeliveryTarget,
        attempt: DeliveryAttempt,
        outcome: AttemptOutcome,
        *,
        status_code: int | None,
        error: str | None,
        duration_ms: int,
        delivery_state: DeliveryState,
    ) -> None:
        """Record how the attempt ended, the delivery's new state and the endpoint's failure
        streak, together."""
        now = self.clock()
        succeeded = outcome is AttemptOutcome.SUCCEEDED
        streak = webhook_endpoints.c.failure_streak
        async with self.engine.begin() as db:
            await db.execute(
                update(webhook_attempts)
                .where(webhook_attempts.c.attempt_id == attempt.attempt_id)
                .values(
                    outcome=outcome.value,
                    status_code=status_code,
                    error=error,
                    duration_ms=duration_ms,
                    finished_at=now,
                )
            )
            await db.execute(
                update(webhook_deliveries)
                .where(webhook_deliveries.c.delivery_id == target.delivery.delivery_id)
                .values(
                    state=delivery_state.value,
                    updated_at=now,
                    **({"delivered_at": now} if succeeded else {}),
                )
            )
            await db.execute(
                update(webhook_endpoints)
                .where(webhook_endpoints.c.endpoint_id == target.endpoint.endpoint_id)
                .values(failure_streak=0 if succeeded else streak + 1)
            )

    async def conclude(self, delivery_id: str, state: DeliveryState) -> None:
        async with self.engine.begin() as db:
            await db.execute(
                update(webhook_deliveries)
                .where(webhook_deliveries.c.delivery_id == delivery_id)
                .values(state=state.value, updated_at=self.clock())
            )

    async def delivery(self, project_id: str, delivery_id: str) -> Delivery | None:
        found = await self._deliveries(
            webhook_deliveries.c.project_id == project_id,
            webhook_deliveries.c.delivery_id == delivery_id,
            limit=1,
        )
        return found[0] if found else None

    async def history(
        self, project_id: str, endpoint_id: str, *, limit: int = 50
    ) -> list[Delivery]:
        """The endpoint's deliveries, newest first, each with every attempt in order."""
        return await self._deliveries(
            webhook_deliveries.c.project_id == project_id,
            webhook_deliveries.c.endpoint_id == endpoint_id,
            limit=limit,
        )

    async def _deliveries(self, *where: Any, limit: int) -> list[Delivery]:
        async with self.engine.connect() as db:
            rows = (
                await db.execute(
                    select(webhook_deliveries, webhook_events.c.event_type)
                    .select_from(_with_event)
                    .where(*where)
                    .order_by(webhook_deliveries.c.created_at.desc())
                    .limit(limit)
                )
            ).all()
            ids = [r.delivery_id for r in rows]
            attempts = await db.execute(
                select(webhook_attempts)
                .where(webhook_attempts.c.delivery_id.in_(ids))
                .order_by(webhook_attempts.c.number)
            )
            logs: dict[str, list[DeliveryAttempt]] = {}
            for a in attempts:
                logs.setdefault(a.delivery_id, []).append(_attempt(a))
        return [_delivery(r, tuple(logs.get(r.delivery_id, ()))) for r in rows]
