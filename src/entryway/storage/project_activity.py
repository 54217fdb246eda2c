"""What a project did lately, newest first, for the dashboard: the UserOperations it sent
(read from their relay charges, which every accepted op has), those our paymaster signed for
it that were mined around the service, and its notarizations."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.paymaster.ports import ENTRYWAY, EXTERNAL
from entryway.storage.schema import notarizations, sponsorship_signatures, usage_events
from entryway.storage.tasks import as_utc

# The relay charge of an accepted op is keyed `userop:<chain>:<hash>` (op_usage_key).
_RELAY_KEY_PREFIX = "userop:"


@dataclass(frozen=True, slots=True)
class SentOp:
    user_op_hash: str
    chain_id: int
    sender: str | None
    sent_at: datetime
    submitted_by: str = ENTRYWAY  # "external": mined around the service


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
        g = sponsorship_signatures.c
        around = (
            select(g.user_op_hash, g.chain_id, g.sender, g.created_at)
            .where(g.project_id == project_id, g.submitted_by == EXTERNAL)
            .order_by(g.created_at.desc())
            .limit(limit)
        )
        async with self.engine.connect() as db:
            rows = (await db.execute(query)).all()
            external = (await db.execute(around)).all()
        ops = [SentOp(r.reference, int(r.chain_id), r.subject, as_utc(r.created_at)) for r in rows]
        ops += [
            SentOp(r.user_op_hash, int(r.chain_id), r.sender, as_utc(r.created_at), EXTERNAL)
            for r in external
        ]
        ops.sort(key=lambda op: op.sent_at, reverse=True)
        return ops[:limit]

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
