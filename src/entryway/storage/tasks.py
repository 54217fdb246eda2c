"""The durable task queue in the database (SQLite or PostgreSQL).

Workers claim ready tasks in one statement: `UPDATE … WHERE task_id IN (SELECT … FOR UPDATE
SKIP LOCKED)` on PostgreSQL, so any number of worker processes share the queue without
taking the same task; SQLite ignores the locking clause and serialises writers itself. A
claim sets a lease; a worker that dies stops renewing it, and once it expires the task is
claimable again (an attempt counted). Only the lease holder may complete, fail or release a
task, so a worker that lost its lease cannot overwrite the outcome of the one that took over.
Times come from one injectable clock, in UTC.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
from sqlalchemy import Row, and_, func, insert, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from entryway.domain.tasks import ExponentialBackoff, Task, TaskState
from entryway.storage.schema import tasks

Clock = Callable[[], datetime]
DEFAULT_MAX_ATTEMPTS = 10


def utc_now() -> datetime:
    return datetime.now(UTC)


def as_utc(moment: datetime) -> datetime:
    """SQLite hands datetimes back naive; they were stored as UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _maybe_utc(moment: datetime | None) -> datetime | None:
    return None if moment is None else as_utc(moment)


async def insert_unless_exists(
    db: AsyncConnection, table: Any, values: Mapping[str, Any], unique: Sequence[str]
) -> None:
    """INSERT … ON CONFLICT DO NOTHING on the columns of a unique constraint: a concurrent
    insert of the same key neither fails nor aborts the caller's transaction."""
    dialect = postgresql if db.dialect.name == "postgresql" else sqlite
    statement = dialect.insert(table).values(**values)
    await db.execute(statement.on_conflict_do_nothing(index_elements=list(unique)))


@dataclass(frozen=True, slots=True)
class Backlog:
    """One kind's unfinished tasks, for the metrics endpoint."""

    kind: str
    queued: int  # ready now or waiting for their retry time
    running: int
    oldest_run_at: datetime | None  # the queued task due longest ago (maybe in the future)


def _task(row: Row[Any]) -> Task:
    return Task(
        task_id=row.task_id,
        kind=row.kind,
        project_id=row.project_id,
        payload=orjson.loads(row.payload),
        state=TaskState(row.state),
        attempts=row.attempts,
        max_attempts=row.max_attempts,
        run_at=as_utc(row.run_at),
        created_at=as_utc(row.created_at),
        updated_at=as_utc(row.updated_at),
        finished_at=_maybe_utc(row.finished_at),
        lease_owner=row.lease_owner,
        lease_expires_at=_maybe_utc(row.lease_expires_at),
        result=None if row.result is None else orjson.loads(row.result),
        error=row.error,
    )


class TaskQueue:
    def __init__(
        self,
        engine: AsyncEngine,
        *,
        clock: Clock = utc_now,
        backoff: ExponentialBackoff | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.engine = engine
        self.clock = clock
        self.backoff = backoff or ExponentialBackoff()
        self._rng = rng or random.Random()

    async def enqueue(
        self,
        kind: str,
        payload: Mapping[str, Any],
        *,
        project_id: str | None,
        run_at: datetime | None = None,
        idempotency_key: str | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> str:
        """A new task's id; with an idempotency key already used for `kind`, that task's id."""
        async with self.engine.begin() as db:
            return await self.enqueue_in(
                db,
                kind,
                payload,
                project_id=project_id,
                run_at=run_at,
                idempotency_key=idempotency_key,
                max_attempts=max_attempts,
            )

    async def enqueue_in(
        self,
        db: AsyncConnection,
        kind: str,
        payload: Mapping[str, Any],
        *,
        project_id: str | None,
        run_at: datetime | None = None,
        idempotency_key: str | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    ) -> str:
        """The same, inside the caller's transaction: the task exists iff that commits."""
        if max_attempts < 1:
            raise ValueError("a task needs at least one attempt")
        now = self.clock()
        values = {
            "task_id": str(uuid.uuid4()),
            "kind": kind,
            "project_id": project_id,
            "payload": orjson.dumps(dict(payload)).decode(),
            "state": TaskState.QUEUED.value,
            "attempts": 0,
            "max_attempts": max_attempts,
            "run_at": run_at or now,
            "idempotency_key": idempotency_key,
            "created_at": now,
            "updated_at": now,
        }
        if idempotency_key is None:
            await db.execute(insert(tasks).values(**values))
            return str(values["task_id"])
        await insert_unless_exists(db, tasks, values, ("kind", "idempotency_key"))
        task_id = await db.scalar(
            select(tasks.c.task_id).where(
                tasks.c.kind == kind, tasks.c.idempotency_key == idempotency_key
            )
        )
        assert task_id is not None
        return str(task_id)

    async def claim(
        self, worker_id: str, kinds: Sequence[str], *, lease_seconds: float, limit: int = 1
    ) -> list[Task]:
        """Up to `limit` ready tasks of these kinds, now leased to `worker_id`, oldest first:
        queued ones due to run, and running ones whose lease expired."""
        if limit < 1 or not kinds:
            return []
        now = self.clock()
        async with self.engine.begin() as db:
            # Whoever held these died on the final attempt: dead-letter, do not run again.
            await db.execute(
                update(tasks)
                .where(
                    tasks.c.state == TaskState.RUNNING.value,
                    tasks.c.lease_expires_at <= now,
                    tasks.c.attempts >= tasks.c.max_attempts,
                )
                .values(
                    state=TaskState.DEAD.value,
                    error="lease expired on the final attempt",
                    lease_owner=None,
                    lease_expires_at=None,
                    finished_at=now,
                    updated_at=now,
                )
            )
            ready = (
                select(tasks.c.task_id)
                .where(
                    tasks.c.kind.in_(list(kinds)),
                    or_(
                        and_(tasks.c.state == TaskState.QUEUED.value, tasks.c.run_at <= now),
                        and_(
                            tasks.c.state == TaskState.RUNNING.value,
                            tasks.c.lease_expires_at <= now,
                        ),
                    ),
                )
                .order_by(tasks.c.run_at)
                .limit(limit)
                .with_for_update(skip_locked=True)
            )
            rows = await db.execute(
                update(tasks)
                .where(tasks.c.task_id.in_(ready))
                .values(
                    state=TaskState.RUNNING.value,
                    attempts=tasks.c.attempts + 1,
                    lease_owner=worker_id,
                    lease_expires_at=now + timedelta(seconds=lease_seconds),
                    updated_at=now,
                )
                .returning(*tasks.c)
            )
            claimed = [_task(r) for r in rows]
        return sorted(claimed, key=lambda t: t.run_at)

    def _held(self, task_id: str, worker_id: str) -> Any:
        return and_(
            tasks.c.task_id == task_id,
            tasks.c.lease_owner == worker_id,
            tasks.c.state == TaskState.RUNNING.value,
        )

    async def heartbeat(self, task_id: str, worker_id: str, *, lease_seconds: float) -> bool:
        """Extend the lease; False if this worker no longer holds it."""
        now = self.clock()
        async with self.engine.begin() as db:
            result = await db.execute(
                update(tasks)
                .where(self._held(task_id, worker_id))
                .values(lease_expires_at=now + timedelta(seconds=lease_seconds), updated_at=now)
            )
        return result.rowcount == 1

    async def complete(self, task_id: str, worker_id: str, result: Any = None) -> bool:
        """Record success; False (and nothing written) if the lease was lost."""
        now = self.clock()
        async with self.engine.begin() as db:
            outcome = await db.execute(
                update(tasks)
                .where(self._held(task_id, worker_id))
                .values(
                    state=TaskState.SUCCEEDED.value,
                    result=orjson.dumps(result).decode(),
                    error=None,
                    lease_owner=None,
                    lease_expires_at=None,
                    finished_at=now,
                    updated_at=now,
                )
            )
        return outcome.rowcount == 1

    async def fail(
        self,
        task_id: str,
        worker_id: str,
        error: str,
        *,
        retry_in: float | None = None,
        permanent: bool = False,
    ) -> TaskState | None:
        """Queue the task again after a backoff (`retry_in` seconds, else the queue's
        exponential backoff) or, if permanent or out of attempts, dead-letter it. The new
        state, or None if the lease was lost."""
        now = self.clock()
        async with self.engine.begin() as db:
            query = select(tasks.c.attempts, tasks.c.max_attempts).where(
                self._held(task_id, worker_id)
            )
            if db.dialect.name == "postgresql":
                query = query.with_for_update()
            row = (await db.execute(query)).one_or_none()
            if row is None:
                return None
            common = {"error": error, "lease_owner": None, "lease_expires_at": None}
            if permanent or row.attempts >= row.max_attempts:
                state = TaskState.DEAD
                values = {**common, "finished_at": now}
            else:
                state = TaskState.QUEUED
                delay = retry_in
                if delay is None:
                    delay = self.backoff.delay_after(row.attempts, self._rng.random())
                values = {**common, "run_at": now + timedelta(seconds=max(delay, 0.0))}
            await db.execute(
                update(tasks)
                .where(tasks.c.task_id == task_id)
                .values(state=state.value, updated_at=now, **values)
            )
        return state

    async def release(self, task_id: str, worker_id: str) -> bool:
        """Give a task back unfinished (a worker shutting down): queued again at once, the
        interrupted attempt not counted."""
        now = self.clock()
        async with self.engine.begin() as db:
            result = await db.execute(
                update(tasks)
                .where(self._held(task_id, worker_id))
                .values(
                    state=TaskState.QUEUED.value,
                    attempts=tasks.c.attempts - 1,
                    run_at=now,
                    lease_owner=None,
                    lease_expires_at=None,
                    updated_at=now,
                )
            )
        return result.rowcount == 1

    async def backlog(self) -> list[Backlog]:
        """Unfinished tasks by kind, in one grouped read that the ready index (state, run_at)
        serves: finished tasks, however many, are not looked at."""
        query = (
            select(tasks.c.kind, tasks.c.state, func.count(), func.min(tasks.c.run_at))
            .where(tasks.c.state.in_([TaskState.QUEUED.value, TaskState.RUNNING.value]))
            .group_by(tasks.c.kind, tasks.c.state)
        )
        by_kind: dict[str, Backlog] = {}
        async with self.engine.connect() as db:
            for kind, state, count, oldest in await db.execute(query):
                seen = by_kind.get(kind) or Backlog(kind, 0, 0, None)
                if state == TaskState.QUEUED.value:
                    seen = Backlog(kind, count, seen.running, as_utc(oldest))
                else:
                    seen = Backlog(kind, seen.queued, count, seen.oldest_run_at)
                by_kind[kind] = seen
        return sorted(by_kind.values(), key=lambda b: b.kind)

    async def get(self, task_id: str, project_id: str) -> Task | None:
        """A project's task; another project's is None, as if it did not exist."""
        async with self.engine.connect() as db:
            row = (
                await db.execute(
                    select(tasks).where(
                        tasks.c.task_id == task_id, tasks.c.project_id == project_id
                    )
                )
            ).one_or_none()
        return None if row is None else _task(row)

    async def keyed_in(self, db: AsyncConnection, kind: str, idempotency_key: str) -> Task | None:
        """The task of `kind` under an idempotency key, read in the caller's transaction."""
        row = (
            await db.execute(
                select(tasks).where(
                    tasks.c.kind == kind, tasks.c.idempotency_key == idempotency_key
                )
            )
        ).one_or_none()
        return None if row is None else _task(row)

    async def find(self, task_id: str) -> Task | None:
        """Any task, for the service itself."""
        async with self.engine.connect() as db:
            row = (await db.execute(select(tasks).where(tasks.c.task_id == task_id))).one_or_none()
        return None if row is None else _task(row)

    async def list(
        self, project_id: str, *, state: TaskState | None = None, limit: int = 50
    ) -> list[Task]:
        """A project's tasks, newest first."""
        query = select(tasks).where(tasks.c.project_id == project_id)
        if state is not None:
            query = query.where(tasks.c.state == state.value)
        query = query.order_by(tasks.c.created_at.desc()).limit(limit)
        async with self.engine.connect() as db:
            return [_task(r) for r in await db.execute(query)]
