"""Every project with its owner's address, for the operator's overview."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.storage.schema import projects, users
from entryway.storage.store import Project, project_from_row

LIST_LIMIT = 1000


@dataclass(frozen=True, slots=True)
class ListedProject:
    project: Project
    owner_email: str


async def every_project(engine: AsyncEngine, limit: int = LIST_LIMIT) -> list[ListedProject]:
    """Projects, oldest first, each with its owner's email."""
    query = (
        select(projects, users.c.email)
        .select_from(projects.join(users, users.c.user_id == projects.c.owner_id))
        .order_by(projects.c.created_at, projects.c.project_id)
        .limit(limit)
    )
    async with engine.connect() as db:
        return [ListedProject(project_from_row(r), r.email) for r in await db.execute(query)]
