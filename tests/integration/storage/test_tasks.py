"""The durable task queue on SQLite and PostgreSQL: leases, retries, dead letters, delays,
idempotent enqueue, and concurrent claimers never sharing a task."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.plans import PlanName
from entryway.domain.tasks import ExponentialBackoff, TaskState
from entryway.storage.store import Store
from entryway.storage.tasks import TaskQueue
from tests.integration.webhooks.support import START, FakeClock


async def new_project(engine: AsyncEngine) -> str:
    store = Store(engine)
    owner = await store.create_user(f"{uuid.uuid4()}@example.org", START)
    return await store.create_project(owner, "tasks", PlanName.FREE, [80002], START)


def queue_on(engine: AsyncEngine, clock: FakeClock) -> TaskQueue:
    return TaskQueue(engine, clock=clock, backoff=ExponentialBackoff(base=10, jitter=0.2))


async def test_a_task_runs_once_and_its_project_sees_its_result(engine: AsyncEngine) -> None:
    clock = FakeClock()
    queue = queue_on(engine, clock)
    pid, other = await new_project(engine), await new_project(engine)
    task_id = await queue.enqueue("mail", {"to": "a@b.c"}, project_id=pid)

    [task] = await queue.claim("w1", ["mail"], lease_seconds=30, limit=5)
    assert (task.task_id, task.state, task.attempts, task.payload) == (
        task_id, TaskState.RUNNING, 1, {"to": "a@b.c"},
    )  # fmt: skip
    assert await queue.claim("w2", ["mail"], lease_seconds=30) == []
    assert await queue.complete(task_id, "w1", {"sent": True})

    done = await queue.get(task_id, pid)
    assert done is not None and done.state is TaskState.SUCCEEDED
    assert (done.result, done.error, done.finished_at) == ({"sent": True}, None, START)
    assert await queue.get(task_id, other) is None
    assert [t.task_id for t in await queue.list(pid)] == [task_id]
    assert await queue.list(other) == []
    clock.advance(3600)
    assert await queue.claim("w2", ["mail"], lease_seconds=30) == []


async def test_an_idempotency_key_enqueues_once_even_concurrently(engine: AsyncEngine) -> None:
    queue = queue_on(engine, FakeClock())
    pid = await new_project(engine)
    ids = await asyncio.gather(
        *(queue.enqueue("mail", {"n": i}, project_id=pid, idempotency_key="k") for i in range(5))
    )
    assert len(set(ids)) == 1
    assert await queue.enqueue("sms", {}, project_id=pid, idempotency_key="k") != ids[0]
    assert len(await queue.list(pid)) == 2


async def test_a_delayed_task_waits_for_its_time(engine: AsyncEngine) -> None:
    clock = FakeClock()
    queue = queue_on(engine, clock)
    later = await queue.enqueue("mail", {}, project_id=None, run_at=START + timedelta(minutes=5))
    now = await queue.enqueue("mail", {}, project_id=None)
    assert [t.task_id for t in await queue.claim("w", ["mail"], lease_seconds=30, limit=5)] == [now]
    assert await queue.complete(now, "w")
    clock.advance(299)
    assert await queue.claim("w", ["mail"], lease_seconds=30, limit=5) == []
    clock.advance(1)
    assert [t.task_id for t in await queue.claim("w", ["mail"], lease_seconds=30)] == [later]


async def test_failures_back_off_exponentially_then_dead_letter(engine: AsyncEngine) -> None:
    clock = FakeClock()
    queue = queue_on(engine, clock)
    task_id = await queue.enqueue("mail", {}, project_id=None, max_attempts=3)
    for attempt, nominal in ((1, 10), (2, 20)):
        [task] = await queue.claim("w", ["mail"], lease_seconds=30)
        assert task.attempts == attempt and not task.final_attempt
        assert await queue.fail(task_id, "w", f"boom {attempt}") is TaskState.QUEUED
        waiting = await queue.find(task_id)
        assert waiting is not None and waiting.error == f"boom {attempt}"
        delay = (waiting.run_at - clock.now).total_seconds()
        assert nominal * 0.8 <= delay <= nominal * 1.2
        clock.advance(delay - 0.5)
        assert await queue.claim("w", ["mail"], lease_seconds=30) == []
        clock.advance(0.5)
    [task] = await queue.claim("w", ["mail"], lease_seconds=30)
    assert task.final_attempt
    assert await queue.fail(task_id, "w", "boom 3") is TaskState.DEAD
    dead = await queue.find(task_id)
    assert dead is not None and (dead.state, dead.attempts, dead.error) == (
        TaskState.DEAD, 3, "boom 3",
    )  # fmt: skip
    clock.advance(10**6)
    assert await queue.claim("w", ["mail"], lease_seconds=30) == []


async def test_a_handler_may_choose_the_delay_or_give_up(engine: AsyncEngine) -> None:
    clock = FakeClock()
    queue = queue_on(engine, clock)
    first = await queue.enqueue("mail", {}, project_id=None)
    await queue.claim("w", ["mail"], lease_seconds=30)
    assert await queue.fail(first, "w", "later", retry_in=600) is TaskState.QUEUED
    waiting = await queue.find(first)
    assert waiting is not None and waiting.run_at == START + timedelta(seconds=600)
    second = await queue.enqueue("mail", {}, project_id=None)
    await queue.claim("w", ["mail"], lease_seconds=30)
    assert await queue.fail(second, "w", "hopeless", permanent=True) is TaskState.DEAD


async def test_an_expired_lease_lets_another_worker_take_over(engine: AsyncEngine) -> None:
    clock = FakeClock()
    queue = queue_on(engine, clock)
    task_id = await queue.enqueue("mail", {}, project_id=None)
    await queue.claim("crashed", ["mail"], lease_seconds=30)
    clock.advance(20)
    assert await queue.heartbeat(task_id, "crashed", lease_seconds=30)  # now until +50
    clock.advance(29)
    assert await queue.claim("rescuer", ["mail"], lease_seconds=30) == []
    clock.advance(1)
    [task] = await queue.claim("rescuer", ["mail"], lease_seconds=30)
    assert (task.attempts, task.lease_owner) == (2, "rescuer")
    # The first worker comes back: it owns nothing any more and cannot overwrite the outcome.
    assert not await queue.heartbeat(task_id, "crashed", lease_seconds=30)
    assert not await queue.complete(task_id, "crashed", "stale")
    assert await queue.fail(task_id, "crashed", "stale") is None
    assert await queue.complete(task_id, "rescuer", "fresh")
    done = await queue.find(task_id)
    assert done is not None and (done.state, done.result) == (TaskState.SUCCEEDED, "fresh")


async def test_a_worker_lost_on_the_final_attempt_dead_letters(engine: AsyncEngine) -> None:
    clock = FakeClock()
    queue = queue_on(engine, clock)
    task_id = await queue.enqueue("mail", {}, project_id=None, max_attempts=1)
    await queue.claim("crashed", ["mail"], lease_seconds=30)
    clock.advance(31)
    assert await queue.claim("other", ["mail"], lease_seconds=30) == []
    dead = await queue.find(task_id)
    assert dead is not None and dead.state is TaskState.DEAD and dead.attempts == 1
    assert dead.error == "lease expired on the final attempt"


async def test_a_released_task_is_ready_again_without_losing_an_attempt(
    engine: AsyncEngine,
) -> None:
    queue = queue_on(engine, FakeClock())
    task_id = await queue.enqueue("mail", {}, project_id=None, max_attempts=1)
    await queue.claim("stopping", ["mail"], lease_seconds=30)
    assert await queue.release(task_id, "stopping")
    [task] = await queue.claim("next", ["mail"], lease_seconds=30)
    assert task.attempts == 1 and task.final_attempt


async def test_workers_take_only_their_kinds(engine: AsyncEngine) -> None:
    queue = queue_on(engine, FakeClock())
    await queue.enqueue("mail", {}, project_id=None)
    assert await queue.claim("w", ["sms"], lease_seconds=30) == []
    assert await queue.claim("w", [], lease_seconds=30) == []
    assert len(await queue.claim("w", ["sms", "mail"], lease_seconds=30)) == 1


async def test_concurrent_claimers_never_share_a_task(engine: AsyncEngine) -> None:
    queue = queue_on(engine, FakeClock())
    ids = {await queue.enqueue("mail", {"n": n}, project_id=None) for n in range(40)}
    taken: list[tuple[str, str]] = []

    async def claimer(name: str) -> None:
        while batch := await queue.claim(name, ["mail"], lease_seconds=30, limit=3):
            taken.extend((name, t.task_id) for t in batch)
            await asyncio.sleep(0)

    await asyncio.gather(*(claimer(f"w{i}") for i in range(6)))
    assert sorted(t for _, t in taken) == sorted(ids)
    assert len({name for name, _ in taken}) > 1
