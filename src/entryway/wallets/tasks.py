"""The worker's handlers for the recovery tasks. The composition root registers them:

    running_worker(engine, ..., handlers=wallet_task_handlers(recovery_flows(services)))

Each handler is idempotent (see `wallets.recoveries`): it reads the recovery, asks what became
of an op it sent before, and only then submits.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from entryway.domain.tasks import PermanentTaskError, Task
from entryway.wallets.recoveries import FINALIZE_TASK, START_TASK, RecoveryFlow

Handler = Callable[[Task], Awaitable[Any]]  # what a worker runs for a task

WALLET_TASKS = (START_TASK, FINALIZE_TASK)


def _recovery_id(task: Task) -> str:
    recovery_id = task.payload.get("recoveryId")
    if not isinstance(recovery_id, str):
        raise PermanentTaskError(f"task {task.task_id} names no recovery")
    return recovery_id


def wallet_task_handlers(flows: Callable[[], RecoveryFlow]) -> Mapping[str, Handler]:
    """`{kind: handler}` for the recovery tasks; `flows` builds the use case when a task
    runs."""

    def handler(step: Callable[[RecoveryFlow, str], Any]) -> Handler:
        async def run(task: Task) -> Any:
            flow, recovery_id = flows(), _recovery_id(task)
            try:
                return await step(flow, recovery_id)
            except Exception as exc:
                if task.final_attempt:
                    await flow.give_up(recovery_id, f"{type(exc).__name__}: {exc}")
                raise

        return run

    return {
        START_TASK: handler(RecoveryFlow.run_start),
        FINALIZE_TASK: handler(RecoveryFlow.run_finalize),
    }
