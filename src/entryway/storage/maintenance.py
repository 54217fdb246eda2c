"""Chains the operator has put under maintenance, in the database every process reads: a row
per chain, with the reason shown to callers and when it began."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.storage.apikeys import utc
from entryway.storage.schema import chain_maintenance


@dataclass(frozen=True, slots=True)
class MaintenanceWindow:
    chain_id: int
    reason: str
    since: datetime | None  # None: marked in the settings, for as long as the process runs


class MaintenanceRecords:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def windows(self) -> dict[int, MaintenanceWindow]:
        async with self.engine.connect() as db:
            rows = await db.execute(select(chain_maintenance))
            return {
                int(r.chain_id): MaintenanceWindow(int(r.chain_id), r.reason or "", utc(r.since))
                for r in rows
            }

    async def begin(self, chain_id: int, reason: str, at: datetime) -> None:
        """Put the chain under maintenance (again: the reason is replaced, `since` kept)."""
        async with self.engine.begin() as db:
            changed = await db.execute(
                update(chain_maintenance)
                .where(chain_maintenance.c.chain_id == chain_id)
                .values(reason=reason)
            )
            if not changed.rowcount:
                await db.execute(
                    insert(chain_maintenance).values(chain_id=chain_id, reason=reason, since=at)
                )

    async def end(self, chain_id: int) -> None:
        async with self.engine.begin() as db:
            await db.execute(
                delete(chain_maintenance).where(chain_maintenance.c.chain_id == chain_id)
            )
