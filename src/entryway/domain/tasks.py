"""Durable tasks, pure: their states, the record a worker is handed, how long to wait before
the next attempt, and the two ways a handler asks for something other than success.

A task is `queued` until a worker claims it (`running`, under a lease that expires); the
worker then completes it (`succeeded`) or fails it: back to `queued` after a backoff while
attempts remain, else `dead` (the dead-letter state, kept for inspection). A lease that
expires puts a `running` task within reach of any other worker: that is the at-least-once
guarantee, and why handlers must be idempotent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from entryway.errors import EntrywayError


class TaskState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    DEAD = "dead"


@dataclass(frozen=True, slots=True)
class Task:
    task_id: str
    kind: str
    project_id: str | None
    payload: Mapping[str, Any]
    state: TaskState
    attempts: int  # claims so far, the current one included
    max_attempts: int
    run_at: datetime
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    lease_owner: str | None
    lease_expires_at: datetime | None
    result: Any
    error: str | None

    @property
    def final_attempt(self) -> bool:
        """A failure now sends the task to the dead-letter state."""
        return self.attempts >= self.max_attempts


def _jittered(delay: float, jitter: float, unit: float) -> float:
    """`delay` spread by up to ±`jitter` of itself; `unit` is a random number in [0, 1), so
    workers that failed together do not all come back at the same instant."""
    return delay * (1.0 - jitter + 2.0 * jitter * unit)


@dataclass(frozen=True, slots=True)
class ExponentialBackoff:
    """base, base·factor, base·factor², … capped, each ±jitter."""

    base: float = 2.0
    factor: float = 2.0
    cap: float = 3600.0
    jitter: float = 0.2

    def delay_after(self, attempt: int, unit: float) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        exponent = max(attempt - 1, 0)
        raw = self.cap if exponent > 64 else min(self.cap, self.base * self.factor**exponent)
        return _jittered(raw, self.jitter, unit)


@dataclass(frozen=True, slots=True)
class RetrySchedule:
    """An explicit list of waits: after failed attempt n, wait `delays[n-1]` (±jitter). The
    task gets one attempt more than there are delays."""

    delays: tuple[float, ...]
    jitter: float = 0.2

    @property
    def max_attempts(self) -> int:
        return len(self.delays) + 1

    def delay_after(self, attempt: int, unit: float) -> float:
        if not self.delays:
            return 0.0
        index = min(max(attempt, 1), len(self.delays)) - 1
        return _jittered(self.delays[index], self.jitter, unit)


class TaskError(EntrywayError):
    """Raised by a handler to steer what happens to its task."""


class RetryTaskError(TaskError):
    """Try again after `delay` seconds (if attempts remain) rather than the queue's backoff."""

    def __init__(self, reason: str, *, delay: float) -> None:
        super().__init__(reason)
        self.delay = delay


class PermanentTaskError(TaskError):
    """Retrying cannot help: dead-letter the task now."""
