"""A worker process (`python -m entryway.worker`, the entry point `entryway worker` runs) is
SIGKILLed in the middle of a webhook delivery, on a file SQLite database and on PostgreSQL.
A second worker process takes the task over once the lease expires and completes it: the
event reaches the receiver (again, with the same webhook-id, as at-least-once promises), the
delivery log shows the interrupted attempt and the successful one, and the project is
charged once."""

from __future__ import annotations

import asyncio
import base64
import os
import signal
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.destinations import PRIVATE_ALLOWED
from entryway.domain.tasks import TaskState
from entryway.domain.webhooks import AttemptOutcome, DeliveryState, EventType, verify_webhook
from entryway.storage.tasks import TaskQueue
from entryway.storage.webhook_log import DeliveryLog
from entryway.storage.webhooks import WebhookStore
from tests.integration.webhooks.support import (
    HANG,
    SECRETS,
    SECRETS_KEY,
    Receiver,
    balance,
    new_project,
    until,
    webhook_charges,
)

LEASE_SECONDS = 1.0


async def start_worker(url: str, log: Path) -> asyncio.subprocess.Process:
    """A worker process with the service's secrets key, allowed to deliver to loopback."""
    env = {**os.environ, "ENTRYWAY_SECRETS_KEY": base64.b64encode(SECRETS_KEY).decode()}
    with log.open("ab") as out:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "entryway.worker", "--database-url", url,
            "--lease-seconds", str(LEASE_SECONDS), "--poll-interval", "0.05",
            "--delivery-timeout", "30", "--webhook-allow-private",
            stdout=out, stderr=out, env=env,
        )  # fmt: skip


async def test_a_killed_workers_task_is_finished_by_another_and_charged_once(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    url = engine.url.render_as_string(hide_password=False)
    logs = tmp_path / "workers.log"
    webhooks = WebhookStore(engine, destinations=PRIVATE_ALLOWED, secrets=SECRETS)
    # The worker process charges on the real clock: credits granted an hour ago.
    project_id = await new_project(engine, at=datetime.now(UTC) - timedelta(hours=1))
    credits = await balance(engine, project_id)

    async with Receiver(answers=[HANG], default=200) as receiver:
        created = await webhooks.create_endpoint(project_id, receiver.url, ["account.deployed"])
        endpoint = created.endpoint
        emitted = await webhooks.emit(
            EventType.ACCOUNT_DEPLOYED, project_id, {"chainId": 80002, "account": "0x" + "11" * 20}
        )
        [queued] = emitted.deliveries

        doomed = await start_worker(url, logs)
        try:
            async with asyncio.timeout(30):
                await receiver.wait_for(1)  # the first attempt is in flight, unanswered
        finally:
            doomed.kill()
            assert await doomed.wait() == -signal.SIGKILL, logs.read_text()

        rescuer = await start_worker(url, logs)
        try:
            queue = TaskQueue(engine)

            async def succeeded() -> bool:
                task = await queue.find(queued.task_id)
                return task is not None and task.state is TaskState.SUCCEEDED

            await until(succeeded)
        finally:
            rescuer.send_signal(signal.SIGTERM)
            async with asyncio.timeout(15):
                assert await rescuer.wait() == 0, logs.read_text()  # a graceful stop

    task = await queue.find(queued.task_id)
    assert task is not None and task.attempts == 2 and task.result["statusCode"] == 200
    assert len(receiver.received) == 2
    for request in receiver.received:
        assert request.headers["webhook-id"] == emitted.event_id
        at = int(request.headers["webhook-timestamp"])
        assert verify_webhook(request.body, request.headers, created.secret, now=at)["data"]
    [delivery] = await DeliveryLog(engine).history(project_id, endpoint.endpoint_id)
    assert delivery.state is DeliveryState.DELIVERED
    assert [a.outcome for a in delivery.log] == [
        AttemptOutcome.INTERRUPTED,
        AttemptOutcome.SUCCEEDED,
    ]
    assert await webhook_charges(engine, project_id) == 1
    assert await balance(engine, project_id) == credits - 10
