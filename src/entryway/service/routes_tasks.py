"""Task status: what became of a durable task (state, attempts, result or error). A key sees
only its own project's tasks; any other id is 404, so ids leak nothing."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from entryway.domain.tasks import Task, TaskState
from entryway.service.auth import CurrentCaller
from entryway.service.problems import Problem
from entryway.service.services import Services
from entryway.storage.tasks import TaskQueue


class TaskStatus(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    id: str
    kind: str
    state: TaskState = Field(
        description="queued (waiting, maybe for a retry), running, succeeded, or dead "
        "(failed every attempt, or failed in a way retrying cannot help)"
    )
    attempts: int
    max_attempts: int
    run_at: datetime = Field(description="when it runs (next), if queued")
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    result: Any = Field(default=None, description="what the task returned, once succeeded")
    error: str | None = Field(description="the last failure, if any")

    @classmethod
    def of(cls, task: Task) -> TaskStatus:
        return cls(
            id=task.task_id,
            kind=task.kind,
            state=task.state,
            attempts=task.attempts,
            max_attempts=task.max_attempts,
            run_at=task.run_at,
            created_at=task.created_at,
            updated_at=task.updated_at,
            finished_at=task.finished_at,
            result=task.result,
            error=task.error,
        )


def task_routes() -> APIRouter:
    router = APIRouter(tags=["tasks"])

    async def status(request: Request, who: CurrentCaller, task_id: str) -> TaskStatus:
        services: Services = request.app.state.services
        task = await TaskQueue(services.store.engine).get(task_id, who.project_id)
        if task is None:
            raise Problem(404, "task_not_found", "Task not found", f"no task {task_id}")
        return TaskStatus.of(task)

    @router.get("/task-status", operation_id="getTaskStatus")
    async def task_status(
        request: Request, who: CurrentCaller, task_id: Annotated[str, Query(alias="id")]
    ) -> TaskStatus:
        """A task's state, attempts, and result or error."""
        return await status(request, who, task_id)

    @router.get("/v1/tasks/{task_id}", operation_id="getTask")
    async def get_task(request: Request, who: CurrentCaller, task_id: str) -> TaskStatus:
        """The same as /task-status?id=."""
        return await status(request, who, task_id)

    return router
