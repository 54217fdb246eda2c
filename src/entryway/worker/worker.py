"""A worker: claims tasks of the kinds it has handlers for, runs up to `concurrency` of them
at once, keeps their leases alive while they run, and records each outcome.

A handler is `async (Task) -> result` (the result must be JSON-serialisable). It may run more
than once for one task (a worker can die after the effect and before recording success), so
it must be idempotent: derive idempotency keys from the task id or from the task's payload.
Raising RetryTaskError picks the retry delay, PermanentTaskError dead-letters the task, and
any other exception is retried on the queue's exponential backoff.

`stop()` is graceful: no new claims, running tasks get `shutdown_grace` seconds to finish,
then they are cancelled and their leases released, so another worker starts them at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from entryway.domain.tasks import PermanentTaskError, RetryTaskError, Task
from entryway.storage.outage import OutageLog
from entryway.storage.tasks import TaskQueue
from entryway.waiting import woken

log = logging.getLogger("entryway.worker")

Handler = Callable[[Task], Awaitable[Any]]


def new_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Worker:
    def __init__(
        self,
        queue: TaskQueue,
        handlers: Mapping[str, Handler],
        *,
        worker_id: str | None = None,
        concurrency: int = 4,
        lease_seconds: float = 30.0,
        poll_interval: float = 1.0,
        shutdown_grace: float = 10.0,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.queue = queue
        self.handlers = dict(handlers)
        self.worker_id = worker_id or new_worker_id()
        self.concurrency = concurrency
        self.lease_seconds = lease_seconds
        self.poll_interval = poll_interval
        self.shutdown_grace = shutdown_grace
        self._stopping = asyncio.Event()
        self._wake = asyncio.Event()
        self._running: set[asyncio.Task[None]] = set()
        self._outage = OutageLog(log, f"worker {self.worker_id}")

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()

    async def run(self) -> None:
        """Claim and run tasks until stop() (or cancellation), then shut down gracefully."""
        log.info("worker %s started: %s", self.worker_id, ", ".join(sorted(self.handlers)))
        try:
            while not self._stopping.is_set():
                free = self.concurrency - len(self._running)
                claimed = await self._claim(free) if free > 0 else []
                for task in claimed:
                    self._start(task)
                if len(claimed) < free or free == 0:
                    await self._idle()
        finally:
            await self._shut_down()
            log.info("worker %s stopped", self.worker_id)

    async def drain(self) -> int:
        """Run every task that is ready now, batch after batch, until none is; the number
        run. For tests and one-shot use: it does not wait for delayed tasks."""
        done = 0
        while batch := await self.queue.claim(
            self.worker_id,
            list(self.handlers),
            lease_seconds=self.lease_seconds,
            limit=self.concurrency,
        ):
            await asyncio.gather(*(self.execute(task) for task in batch))
            done += len(batch)
        return done

    async def execute(self, task: Task) -> None:
        """Run one claimed task's handler under a renewed lease and record what happened."""
        handler = self.handlers[task.kind]
        run = asyncio.ensure_future(handler(task))
        lease = asyncio.create_task(self._keep_lease(task, run))
        try:
            result = await asyncio.shield(run)
        except asyncio.CancelledError:
            if lease.done() and not lease.cancelled() and lease.result() is False:
                log.warning("task %s: lease lost, another worker owns it now", task.task_id)
                return
            run.cancel()
            with contextlib.suppress(asyncio.CancelledError, SQLAlchemyError):
                await asyncio.shield(self.queue.release(task.task_id, self.worker_id))
            raise
        except RetryTaskError as exc:
            # A task waiting on something (an op not mined yet) takes this path every few
            # seconds: routine, so debug and no traceback; what is wrong is logged elsewhere.
            log.debug("task %s (%s) retries in %g s: %s", task.task_id, task.kind, exc.delay, exc)
            await self.queue.fail(task.task_id, self.worker_id, str(exc), retry_in=exc.delay)
        except PermanentTaskError as exc:
            log.warning("task %s (%s) given up: %s", task.task_id, task.kind, exc)
            await self.queue.fail(task.task_id, self.worker_id, str(exc), permanent=True)
        except Exception as exc:
            log.exception("task %s (%s) failed", task.task_id, task.kind)
            await self.queue.fail(task.task_id, self.worker_id, f"{type(exc).__name__}: {exc}")
        else:
            await self.queue.complete(task.task_id, self.worker_id, result)
        finally:
            lease.cancel()

    async def _keep_lease(self, task: Task, run: asyncio.Future[Any]) -> bool:
        """Renew the lease every third of its length; cancel the run if it was lost."""
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            try:
                held = await self.queue.heartbeat(
                    task.task_id, self.worker_id, lease_seconds=self.lease_seconds
                )
            except Exception:
                log.warning("task %s: heartbeat failed, retrying", task.task_id, exc_info=True)
                continue
            if not held:
                run.cancel()
                return False

    async def _claim(self, limit: int) -> list[Task]:
        try:
            claimed = await self.queue.claim(
                self.worker_id,
                list(self.handlers),
                lease_seconds=self.lease_seconds,
                limit=limit,
            )
        except (SQLAlchemyError, OSError) as exc:
            # Keep the worker alive and try again at the next poll; an outage (unreachable,
            # out of connections, read-only) is said once, and its end once.
            if not self._outage.failed(exc):
                log.warning("worker %s: claiming failed", self.worker_id, exc_info=True)
            return []
        self._outage.answered()
        return claimed

    def _start(self, task: Task) -> None:
        job = asyncio.create_task(self._execute_logged(task), name=f"task-{task.task_id}")
        self._running.add(job)
        job.add_done_callback(self._finished)

    async def _execute_logged(self, task: Task) -> None:
        try:
            await self.execute(task)
        except (SQLAlchemyError, OSError):
            # The outcome could not be recorded: the lease will expire and the task rerun.
            log.exception("task %s: recording its outcome failed", task.task_id)

    def _finished(self, job: asyncio.Task[None]) -> None:
        self._running.discard(job)
        self._wake.set()

    async def _idle(self) -> None:
        self._wake.clear()
        await woken(self._wake, self.poll_interval)

    async def _shut_down(self) -> None:
        if not self._running:
            return
        _, late = await asyncio.wait(set(self._running), timeout=self.shutdown_grace)
        for job in late:
            job.cancel()
        if late:
            await asyncio.wait(late)
