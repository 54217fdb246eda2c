"""Webhook delivery end to end, on SQLite and PostgreSQL: events fanned out as durable tasks,
POSTed by the worker to a real HTTP receiver, signed, retried on the schedule, logged,
charged once, and endpoints disabled on 410 or on repeated failure. The receiver listens on
loopback, so this rig is an operator's that allows private destinations."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.destinations import PRIVATE_ALLOWED
from entryway.domain.tasks import RetrySchedule, TaskState
from entryway.domain.webhooks import (
    AttemptOutcome,
    DeliveryInProgressError,
    DeliveryState,
    DisabledReason,
    EventType,
    WebhookVerificationError,
    verify_webhook,
)
from entryway.storage.schema import webhook_endpoints
from entryway.storage.tasks import TaskQueue
from entryway.storage.webhook_log import DeliveryLog
from entryway.storage.webhooks import DELIVERY_TASK, WebhookStore
from entryway.worker.delivery import DeliverySettings
from entryway.worker.main import WorkerSettings, worker_for
from entryway.worker.worker import Worker
from tests.integration.webhooks.support import (
    HANG,
    SECRETS,
    FakeClock,
    Receiver,
    RecordedAlerts,
    balance,
    new_project,
    webhook_charges,
)

SCHEDULE = RetrySchedule((1, 2, 3), jitter=0.0)  # four attempts, waits known exactly
INCLUDED = {"chainId": 80002, "userOpHash": "0x" + "ab" * 32, "success": True}


@dataclass
class Rig:
    engine: AsyncEngine
    clock: FakeClock
    webhooks: WebhookStore
    log: DeliveryLog
    alerts: RecordedAlerts
    worker: Worker
    project_id: str
    secrets: dict[str, str] = field(default_factory=dict)  # shown at creation, by endpoint

    async def endpoint(self, url: str, events: tuple[str, ...] = ("userop.included",)) -> str:
        created = await self.webhooks.create_endpoint(self.project_id, url, events)
        self.secrets[created.endpoint.endpoint_id] = created.secret
        return created.endpoint.endpoint_id

    async def run_after(self, seconds: float) -> int:
        """Let `seconds` pass on the clock, then run whatever became due."""
        self.clock.advance(seconds)
        return await self.worker.drain()


@pytest.fixture
async def rig(engine: AsyncEngine) -> AsyncIterator[Rig]:
    clock = FakeClock()
    alerts = RecordedAlerts()
    settings = WorkerSettings(
        delivery=DeliverySettings(timeout=0.5, schedule=SCHEDULE, destinations=PRIVATE_ALLOWED)
    )
    queue = TaskQueue(engine, clock=clock)
    webhooks = WebhookStore(
        engine, queue=queue, clock=clock, max_attempts=SCHEDULE.max_attempts,
        destinations=PRIVATE_ALLOWED, secrets=SECRETS,
    )  # fmt: skip
    async with worker_for(
        engine, settings=settings, alerts=alerts, clock=clock, secrets=SECRETS
    ) as worker:
        yield Rig(
            engine, clock, webhooks, DeliveryLog(engine, clock=clock), alerts, worker,
            await new_project(engine),
        )  # fmt: skip


async def test_a_receiver_down_then_up_gets_the_event_once_per_attempt_until_it_acknowledges(
    rig: Rig,
) -> None:
    receiver = Receiver(answers=[500], default=204)  # not listening yet: down
    credits = await balance(rig.engine, rig.project_id)
    endpoint_id = await rig.endpoint(receiver.url)
    secret = rig.secrets[endpoint_id]
    emitted = await rig.webhooks.emit(EventType.USEROP_INCLUDED, rig.project_id, INCLUDED)
    [queued] = emitted.deliveries

    assert await rig.worker.drain() == 1  # attempt 1: connection refused
    assert await rig.run_after(0.999) == 0  # the schedule's first wait is one second
    assert await rig.run_after(0.001) == 1  # attempt 2: still down
    async with receiver:
        assert await rig.run_after(2) == 1  # attempt 3: up, answers 500
        assert len(receiver.received) == 1
        assert await rig.run_after(3) == 1  # attempt 4: 204, acknowledged
        assert await rig.run_after(3600) == 0
        assert len(receiver.received) == 2

        sent_at = [int(a.started_at.timestamp()) for a in (await rig.log.history(
            rig.project_id, endpoint_id))[0].log]  # fmt: skip
        for request, at in zip(receiver.received, sent_at[2:], strict=True):
            assert request.headers["webhook-id"] == emitted.event_id
            assert request.headers["webhook-timestamp"] == str(at)
            assert request.headers["content-type"] == "application/json"
            body = verify_webhook(request.body, request.headers, secret, now=at)
            assert body["type"] == "userop.included" and body["data"] == INCLUDED
            assert body["timestamp"] == "2026-11-21T12:00:00.000Z"

        [delivery] = await rig.log.history(rig.project_id, endpoint_id)
        assert (delivery.delivery_id, delivery.state) == (
            queued.delivery_id,
            DeliveryState.DELIVERED,
        )
        assert [(a.number, a.outcome, a.status_code) for a in delivery.log] == [
            (1, AttemptOutcome.FAILED, None),
            (2, AttemptOutcome.FAILED, None),
            (3, AttemptOutcome.FAILED, 500),
            (4, AttemptOutcome.SUCCEEDED, 204),
        ]
        assert all("Connect" in (a.error or "") for a in delivery.log[:2])
        assert all(a.duration_ms is not None and a.duration_ms >= 0 for a in delivery.log)
        assert [a.started_at - delivery.log[0].started_at for a in delivery.log] == [
            timedelta(seconds=s) for s in (0, 1, 3, 6)
        ]
        task = await rig.worker.queue.get(queued.task_id, rig.project_id)
        assert task is not None and (task.state, task.attempts) == (TaskState.SUCCEEDED, 4)
        assert task.result["statusCode"] == 204
        assert await webhook_charges(rig.engine, rig.project_id) == 1
        assert await balance(rig.engine, rig.project_id) == credits - 10

        # A manual replay: the same event, same webhook-id, logged as attempt 5, not charged again.
        replay = await rig.webhooks.replay(rig.project_id, queued.delivery_id)
        assert replay is not None and replay.task_id != queued.task_id
        assert await rig.worker.drain() == 1
        assert [r.headers["webhook-id"] for r in receiver.received] == [emitted.event_id] * 3
        [delivery] = await rig.log.history(rig.project_id, endpoint_id)
        assert [a.number for a in delivery.log] == [1, 2, 3, 4, 5] and delivery.replays == 1
        assert await webhook_charges(rig.engine, rig.project_id) == 1
        assert await rig.webhooks.replay(await new_project(rig.engine), queued.delivery_id) is None


async def test_410_gone_disables_the_endpoint_at_once(rig: Rig) -> None:
    async with Receiver(answers=[410]) as receiver:
        endpoint_id = await rig.endpoint(receiver.url)
        emitted = await rig.webhooks.emit(EventType.USEROP_INCLUDED, rig.project_id, INCLUDED)
        assert await rig.worker.drain() == 1
        assert await rig.run_after(3600) == 0
        assert len(receiver.received) == 1

        endpoint = await rig.webhooks.endpoint(rig.project_id, endpoint_id)
        assert endpoint is not None and not endpoint.enabled
        assert endpoint.disabled_reason is DisabledReason.GONE
        assert [(e, r) for e, r, _ in rig.alerts.raised] == [(endpoint_id, DisabledReason.GONE)]
        task = await rig.worker.queue.find(emitted.deliveries[0].task_id)
        assert task is not None and task.state is TaskState.DEAD and "410" in (task.error or "")
        [delivery] = await rig.log.history(rig.project_id, endpoint_id)
        assert delivery.state is DeliveryState.FAILED
        assert [a.outcome for a in delivery.log] == [AttemptOutcome.GONE]
        assert await webhook_charges(rig.engine, rig.project_id) == 0
        # Disabled endpoints get nothing more, until the project enables them again.
        again = await rig.webhooks.emit(EventType.USEROP_INCLUDED, rig.project_id, INCLUDED)
        assert again.deliveries == ()
        enabled = await rig.webhooks.update_endpoint(rig.project_id, endpoint_id, enabled=True)
        assert enabled is not None and enabled.enabled and enabled.disabled_reason is None


async def test_a_delivery_failing_its_whole_schedule_disables_the_endpoint_with_an_alert(
    rig: Rig,
) -> None:
    async with Receiver(answers=[HANG], default=503) as receiver:
        endpoint_id = await rig.endpoint(receiver.url)
        await rig.webhooks.emit(EventType.USEROP_INCLUDED, rig.project_id, INCLUDED)
        for wait in (0, 1, 2, 3, 3600):
            await rig.run_after(wait)
        assert len(receiver.received) == 4

        [delivery] = await rig.log.history(rig.project_id, endpoint_id)
        assert delivery.state is DeliveryState.FAILED
        assert [(a.status_code, a.error) for a in delivery.log] == [
            (None, "timed out after 0.5 s"), (503, None), (503, None), (503, None),
        ]  # fmt: skip
        endpoint = await rig.webhooks.endpoint(rig.project_id, endpoint_id)
        assert endpoint is not None and endpoint.disabled_reason is DisabledReason.FAILING
        assert endpoint.failure_streak == 4
        [(alerted, reason, detail)] = rig.alerts.raised
        assert (alerted, reason) == (endpoint_id, DisabledReason.FAILING)
        assert "4 attempts" in detail and "HTTP 503" in detail
        assert await webhook_charges(rig.engine, rig.project_id) == 0


async def test_during_a_rotation_both_secrets_sign_and_afterwards_only_the_new(rig: Rig) -> None:
    async with Receiver() as receiver:
        endpoint_id = await rig.endpoint(receiver.url)
        old = rig.secrets[endpoint_id]
        rotated = await rig.webhooks.rotate_secret(rig.project_id, endpoint_id, timedelta(hours=1))
        assert rotated is not None and rotated.secret != old
        new = rotated.secret

        await rig.webhooks.emit(EventType.USEROP_INCLUDED, rig.project_id, INCLUDED)
        await rig.worker.drain()
        during = receiver.received[-1]
        assert len(during.headers["webhook-signature"].split(" ")) == 2
        for secret in (old, new):
            verify_webhook(during.body, during.headers, secret, now=rig.clock.unix)

        rig.clock.advance(3601)
        await rig.webhooks.emit(EventType.USEROP_INCLUDED, rig.project_id, INCLUDED)
        await rig.worker.drain()
        after = receiver.received[-1]
        assert len(after.headers["webhook-signature"].split(" ")) == 1
        verify_webhook(after.body, after.headers, new, now=rig.clock.unix)
        with pytest.raises(WebhookVerificationError):
            verify_webhook(after.body, after.headers, old, now=rig.clock.unix)


async def test_events_reach_only_subscribed_enabled_endpoints_once_per_key(rig: Rig) -> None:
    async with Receiver() as receiver:
        included = await rig.endpoint(receiver.url + "/a")
        both = await rig.endpoint(receiver.url + "/b", ("userop.included", "credits.low"))
        await rig.endpoint(receiver.url + "/c", ("credits.low",))
        off = await rig.endpoint(receiver.url + "/d")
        await rig.webhooks.update_endpoint(rig.project_id, off, enabled=False)
        await rig.endpoint(receiver.url + "/e")
        other = (
            await rig.webhooks.create_endpoint(
                await new_project(rig.engine), receiver.url + "/f", ["userop.included"]
            )
        ).endpoint

        first = await rig.webhooks.emit(
            EventType.USEROP_INCLUDED, rig.project_id, INCLUDED, idempotency_key="op-1"
        )
        again = await rig.webhooks.emit(
            EventType.USEROP_INCLUDED, rig.project_id, INCLUDED, idempotency_key="op-1"
        )
        assert again == first and len(first.deliveries) == 3
        await rig.webhooks.delete_endpoint(rig.project_id, included)
        assert await rig.worker.drain() == 3
        assert sorted(r.path for r in receiver.received) == ["/hooks/b", "/hooks/e"]
        assert other.endpoint_id not in {d.endpoint_id for d in first.deliveries}
        [to_both] = await rig.log.history(rig.project_id, both)
        [to_deleted] = await rig.log.history(rig.project_id, included)
        states = {d.endpoint_id: d.state for d in (to_both, to_deleted)}
        assert states == {both: DeliveryState.DELIVERED, included: DeliveryState.SKIPPED}
        assert await webhook_charges(rig.engine, rig.project_id) == 2


async def test_a_worker_lost_after_delivering_does_not_deliver_or_charge_again(rig: Rig) -> None:
    async with Receiver() as receiver:
        await rig.endpoint(receiver.url)
        await rig.webhooks.emit(EventType.USEROP_INCLUDED, rig.project_id, INCLUDED)
        # A worker delivers, then dies before recording the task's success.
        [task] = await rig.worker.queue.claim("doomed", [DELIVERY_TASK], lease_seconds=30)
        await rig.worker.handlers[DELIVERY_TASK](task)
        assert len(receiver.received) == 1
        assert await rig.run_after(31) == 1  # the lease expired: another worker takes it
        assert len(receiver.received) == 1
        assert await webhook_charges(rig.engine, rig.project_id) == 1
        done = await rig.worker.queue.find(task.task_id)
        assert done is not None and (done.state, done.attempts) == (TaskState.SUCCEEDED, 2)


async def test_a_delivery_whose_worker_died_on_the_final_attempt_can_be_replayed(
    rig: Rig,
) -> None:
    async with Receiver(answers=[503, 503, 503]) as receiver:
        await rig.endpoint(receiver.url)
        emitted = await rig.webhooks.emit(EventType.USEROP_INCLUDED, rig.project_id, INCLUDED)
        [queued] = emitted.deliveries
        for wait in (0, 1, 2):
            await rig.run_after(wait)
        rig.clock.advance(3)
        await rig.worker.queue.claim("doomed", [DELIVERY_TASK], lease_seconds=30)
        with pytest.raises(DeliveryInProgressError):
            await rig.webhooks.replay(rig.project_id, queued.delivery_id)
        assert await rig.run_after(31) == 0  # the final attempt's lease expired: dead letter
        task = await rig.worker.queue.find(queued.task_id)
        assert task is not None and task.state is TaskState.DEAD

        replay = await rig.webhooks.replay(rig.project_id, queued.delivery_id)
        assert replay is not None
        assert await rig.worker.drain() == 1
        [delivery] = await rig.log.history(rig.project_id, replay.endpoint_id)
        assert delivery.state is DeliveryState.DELIVERED and len(receiver.received) == 4


async def test_a_url_no_client_can_encode_fails_each_attempt_and_disables_the_endpoint(
    rig: Rig,
) -> None:
    """A URL stored before hosts were checked (registration refuses it now) must not crash
    the delivery: each attempt fails with a reason, and the schedule's end disables."""
    endpoint_id = await rig.endpoint("http://hooks.example.org/f")
    async with rig.engine.begin() as db:
        await db.execute(
            update(webhook_endpoints)
            .where(webhook_endpoints.c.endpoint_id == endpoint_id)
            .values(url="http://xn--localhost-:9999/f")
        )
    await rig.webhooks.emit(EventType.USEROP_INCLUDED, rig.project_id, INCLUDED)
    for wait in (0, 1, 2, 3, 3600):
        await rig.run_after(wait)

    [delivery] = await rig.log.history(rig.project_id, endpoint_id)
    assert delivery.state is DeliveryState.FAILED
    assert [(a.outcome, a.error) for a in delivery.log] == [
        (AttemptOutcome.FAILED, "the URL is not valid")
    ] * 4
    endpoint = await rig.webhooks.endpoint(rig.project_id, endpoint_id)
    assert endpoint is not None and endpoint.disabled_reason is DisabledReason.FAILING
    [(alerted, reason, detail)] = rig.alerts.raised
    assert (alerted, reason) == (endpoint_id, DisabledReason.FAILING)
    assert "the URL is not valid" in detail
    assert delivery.task_id is not None
    task = await TaskQueue(rig.engine).find(delivery.task_id)
    assert task is not None and (task.attempts, task.error) == (4, "the URL is not valid")
