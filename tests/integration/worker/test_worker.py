"""The worker loop on a real database: concurrency, retries, leases kept alive while a task
runs, a handler cancelled when its lease is taken, and a graceful stop."""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from urllib.parse import urlsplit

import pytest
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.tasks import (
    ExponentialBackoff,
    PermanentTaskError,
    RetryTaskError,
    Task,
    TaskState,
)
from entryway.storage.engine import make_engine, migrate
from entryway.storage.schema import tasks
from entryway.storage.tasks import TaskQueue
from entryway.worker.worker import Handler, Worker
from tests.integration.postgres import fresh_database
from tests.integration.webhooks.support import until
from tests.tcp_proxy import TcpProxy

FAST = ExponentialBackoff(base=0.01, jitter=0.0)


def worker_with(engine: AsyncEngine, handlers: dict[str, Handler], **kw: Any) -> Worker:
    settings = {"concurrency": 3, "lease_seconds": 5.0, "poll_interval": 0.02, **kw}
    return Worker(TaskQueue(engine, backoff=FAST), handlers, **settings)


async def state_of(queue: TaskQueue, task_id: str) -> Task:
    task = await queue.find(task_id)
    assert task is not None
    return task


async def test_tasks_run_concurrently_up_to_the_limit_and_outcomes_are_recorded(
    engine: AsyncEngine,
) -> None:
    running = 0
    peak = 0
    calls: dict[str, int] = {}

    async def sleepy(task: Task) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.1)
        running -= 1
        return int(task.payload["n"]) * 2

    async def flaky(task: Task) -> str:
        calls[task.task_id] = calls.get(task.task_id, 0) + 1
        if calls[task.task_id] == 1:
            raise RuntimeError("first time unlucky")
        if calls[task.task_id] == 2:
            raise RetryTaskError("not yet", delay=0.05)
        return "third time"

    async def hopeless(task: Task) -> None:
        raise PermanentTaskError("cannot ever work")

    worker = worker_with(engine, {"sleepy": sleepy, "flaky": flaky, "hopeless": hopeless})
    queue = worker.queue
    sleepers = [await queue.enqueue("sleepy", {"n": n}, project_id=None) for n in range(6)]
    flaky_id = await queue.enqueue("flaky", {}, project_id=None)
    hopeless_id = await queue.enqueue("hopeless", {}, project_id=None)
    run = asyncio.create_task(worker.run())

    async def all_finished() -> bool:
        states = [(await state_of(queue, t)).state for t in [*sleepers, flaky_id, hopeless_id]]
        return all(s in (TaskState.SUCCEEDED, TaskState.DEAD) for s in states)

    await until(all_finished)
    worker.stop()
    await run
    assert peak == 3
    assert [(await state_of(queue, t)).result for t in sleepers] == [0, 2, 4, 6, 8, 10]
    flaky_task = await state_of(queue, flaky_id)
    assert (flaky_task.state, flaky_task.attempts, flaky_task.result) == (
        TaskState.SUCCEEDED, 3, "third time",
    )  # fmt: skip
    dead = await state_of(queue, hopeless_id)
    assert (dead.state, dead.attempts, dead.error) == (TaskState.DEAD, 1, "cannot ever work")


async def test_a_long_task_keeps_its_lease_while_it_runs(engine: AsyncEngine) -> None:
    async def long(task: Task) -> str:
        await asyncio.sleep(0.8)
        return "done"

    worker = worker_with(engine, {"long": long}, lease_seconds=0.3)
    task_id = await worker.queue.enqueue("long", {}, project_id=None)
    run = asyncio.create_task(worker.run())
    await until(lambda: _state_is(worker.queue, task_id, TaskState.RUNNING))
    for _ in range(4):  # a rival polling throughout never gets it
        await asyncio.sleep(0.15)
        assert await worker.queue.claim("rival", ["long"], lease_seconds=5) == []
    await until(lambda: _state_is(worker.queue, task_id, TaskState.SUCCEEDED))
    worker.stop()
    await run
    assert (await state_of(worker.queue, task_id)).attempts == 1


async def test_a_handler_whose_lease_was_taken_is_cancelled(engine: AsyncEngine) -> None:
    cancelled = asyncio.Event()

    async def stubborn(task: Task) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    worker = worker_with(engine, {"stubborn": stubborn}, lease_seconds=0.3)
    task_id = await worker.queue.enqueue("stubborn", {}, project_id=None)
    run = asyncio.create_task(worker.run())
    await until(lambda: _state_is(worker.queue, task_id, TaskState.RUNNING))
    async with engine.begin() as db:  # as if the lease had expired and another worker claimed it
        await db.execute(
            update(tasks).where(tasks.c.task_id == task_id).values(lease_owner="thief")
        )
    async with asyncio.timeout(5):
        await cancelled.wait()
    worker.stop()
    await run
    task = await state_of(worker.queue, task_id)
    assert (task.state, task.lease_owner) == (TaskState.RUNNING, "thief")


async def test_stopping_lets_short_tasks_finish_and_gives_long_ones_back(
    engine: AsyncEngine,
) -> None:
    started = asyncio.Event()

    async def short(task: Task) -> str:
        started.set()
        await asyncio.sleep(0.1)
        return "finished"

    async def endless(task: Task) -> None:
        await asyncio.sleep(30)

    worker = worker_with(engine, {"short": short, "endless": endless}, shutdown_grace=0.4)
    short_id = await worker.queue.enqueue("short", {}, project_id=None)
    endless_id = await worker.queue.enqueue("endless", {}, project_id=None)
    run = asyncio.create_task(worker.run())
    await until(lambda: _state_is(worker.queue, endless_id, TaskState.RUNNING))
    await started.wait()
    worker.stop()
    async with asyncio.timeout(5):
        await run
    assert (await state_of(worker.queue, short_id)).result == "finished"
    given_back = await state_of(worker.queue, endless_id)
    assert (given_back.state, given_back.attempts, given_back.lease_owner) == (
        TaskState.QUEUED, 0, None,
    )  # fmt: skip


async def _state_is(queue: TaskQueue, task_id: str, state: TaskState) -> bool:
    return (await state_of(queue, task_id)).state is state


async def test_a_task_waiting_to_be_retried_is_logged_at_debug_without_a_traceback(
    engine: AsyncEngine, caplog: pytest.LogCaptureFixture
) -> None:
    """A settlement polls until its op is mined: each poll is a retry, the normal path."""
    attempts = 0

    async def settle(task: Task) -> str:
        nonlocal attempts
        attempts += 1
        if attempts < 4:
            raise RetryTaskError("not mined yet", delay=0.01)
        return "settled"

    async def broken(task: Task) -> None:
        raise RuntimeError("a fault of ours")

    caplog.set_level(logging.DEBUG, logger="entryway.worker")
    worker = worker_with(engine, {"sponsorship.settle": settle, "broken": broken})
    settle_id = await worker.queue.enqueue("sponsorship.settle", {}, project_id=None)
    broken_id = await worker.queue.enqueue("broken", {}, project_id=None)
    run = asyncio.create_task(worker.run())
    await until(lambda: _done(worker.queue, settle_id))
    await until(lambda: _attempted(worker.queue, broken_id))
    worker.stop()
    await run

    retries = [r for r in caplog.records if "not mined yet" in r.getMessage()]
    assert len(retries) == 3, [r.getMessage() for r in caplog.records]
    assert all(r.levelno == logging.DEBUG and r.exc_info is None for r in retries)
    faults = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert faults, "a real failure is logged"
    assert all(r.exc_info is not None and broken_id in r.getMessage() for r in faults)


async def _done(queue: TaskQueue, task_id: str) -> bool:
    return (await state_of(queue, task_id)).state is TaskState.SUCCEEDED


async def _attempted(queue: TaskQueue, task_id: str) -> bool:
    return (await state_of(queue, task_id)).attempts >= 1


async def test_a_database_outage_is_logged_once_and_its_end_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """PostgreSQL behind a proxy the test stops: the worker keeps polling, says so in one
    warning without a traceback (not one per poll), and once at info when it claims again."""
    async with fresh_database("a worker's database outage") as (url, _):
        where = urlsplit(url)
        proxy = TcpProxy(where.hostname or "127.0.0.1", where.port or 5432)
        await proxy.start()
        engine = make_engine(where._replace(netloc=f"postgres@127.0.0.1:{proxy.port}").geturl())
        try:
            await migrate(engine)
            caplog.set_level(logging.DEBUG, logger="entryway.worker")
            ran: list[str] = []

            async def note(task: Task) -> None:
                ran.append(task.task_id)

            worker = worker_with(engine, {"note": note})
            run = asyncio.create_task(worker.run())
            await proxy.stop()
            await asyncio.sleep(0.5)  # about 25 polls, each failing
            await proxy.start()
            task_id = await worker.queue.enqueue("note", {}, project_id=None)
            await until(lambda: _done(worker.queue, task_id))
            worker.stop()
            await run
        finally:
            await engine.dispose()
            await proxy.stop()
    assert ran == [task_id]
    said = [r for r in caplog.records if "database" in r.getMessage()]
    assert [r.levelno for r in said] == [logging.WARNING, logging.INFO], said
    assert said[0].exc_info is None and "unavailable" in said[0].getMessage()
    assert "answers again" in said[1].getMessage()
    assert not [r for r in caplog.records if "claiming failed" in r.getMessage()]
