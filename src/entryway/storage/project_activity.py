"""What a project did lately, newest first, for the dashboard: the UserOperations it sent
(read from their relay charges, which every accepted op has) and its notarizations."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.storage.schema import notarizations, usage_events
from entryway.storage.tasks import as_utc

# The relay charge of an accepted op is keyed `userop:<chain>:<hash>` (op_usage_key).
_RELAY_KEY_PREFIX = "userop:"


@dataclass(frozen=True, slots=True)
class SentOp:
    user_op_hash: str
    chain_id: int
    sender: str | None
    sent_at: datetime


class ProjectActivity:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def user_operations(self, project_id: str, *, limit: int = 25) -> list[SentOp]:
        """The UserOperations the project's keys sent, newest first."""
        e = usage_events.c
        query = (
            select(e.reference, e.chain_id, e.subject, e.created_at)
            .where(
                e.project_id == project_id,
                e.idempotency_key.startswith(_RELAY_KEY_PREFIX, autoescape=True),
                e.reference.is_not(None),
                e.chain_id.is_not(None),
            )
            .order_by(e.created_at.desc(), e.event_id)
            .limit(limit)
        )
        async with self.engine.connect() as db:
            rows = (await db.execute(query)).all()
        return [SentOp(r.reference, int(r.chain_id), r.subject, as_utc(r.created_at)) for r in rows]

    async def notarization_ids(self, project_id: str, *, limit: int = 20) -> list[str]:
        """The project's latest notarizations, newest first."""
        n = notarizations.c
        query = (
            select(n.notarization_id)
            .where(n.project_id == project_id)
            .order_by(n.created_at.desc(), n.notarization_id)
            .limit(limit)
        )
        async with self.engine.connect() as db:
            return list((await db.execute(query)).scalars())
