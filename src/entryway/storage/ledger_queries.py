"""Reads of the credit ledger: a project's lots, the credits charged under a reference (and
each charge of it), the holds never linked to a sent op, whether a project has a usage event."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from entryway.domain.credits import CreditAccount, CreditLot, LotKind
from entryway.storage import ledger_postings as postings
from entryway.storage.ledger_records import UsageStatus, utc
from entryway.storage.ledger_reorgs import unsettled_inclusions
from entryway.storage.schema import credit_lots, usage_events


@dataclass(frozen=True, slots=True)
class Charge:
    """One usage event under a reference: a relay, a sponsorship's hold or settlement."""

    operation: str
    credits: int
    status: UsageStatus
    at: datetime  # when it was charged (a hold: when the sponsorship was signed)
    settled_at: datetime | None
    breakdown: str | None  # the quote's components, JSON (a settlement's L1 fee among them)


class LedgerQueries:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def account(self, project_id: str) -> CreditAccount:
        async with self.engine.connect() as db:
            return await self._account(db, project_id)

    async def _account(self, db: AsyncConnection, project_id: str) -> CreditAccount:
        rows = (
            await db.execute(select(credit_lots).where(credit_lots.c.project_id == project_id))
        ).all()
        account = CreditAccount()
        for r in rows:
            kind = LotKind(r.kind)
            granted, expires = utc(r.granted_at), utc(r.expires_at)
            account = account.add(
                CreditLot(r.lot_id, kind, r.amount, r.remaining, granted, expires)
            )
        return account

    async def credits_for(self, project_id: str, reference: str) -> tuple[int, bool]:
        """The credits charged under a reference (net of reversals), and whether all of it
        is final: no hold still waiting for its receipt, and every settlement standing
        mined deep enough in its chain (`ledger_reorgs.finalize`)."""
        async with self.engine.connect() as db:
            unsettled = await unsettled_inclusions(db, project_id, reference)
            rows = (
                await db.execute(
                    select(usage_events.c.credits, usage_events.c.status).where(
                        usage_events.c.project_id == project_id,
                        usage_events.c.reference == reference,
                    )
                )
            ).all()
        final = not unsettled and all(r.status != UsageStatus.HELD for r in rows)
        return sum(int(r.credits) for r in rows), final

    async def charges_for(self, project_id: str, reference: str) -> list[Charge]:
        """The usage events charged to `project_id` under a reference, oldest first."""
        e = usage_events.c
        async with self.engine.connect() as db:
            rows = (
                await db.execute(
                    select(e.operation, e.credits, e.status, e.created_at, e.settled_at)
                    .add_columns(e.breakdown)
                    .where(e.project_id == project_id, e.reference == reference)
                    .order_by(e.created_at, e.event_id)
                )
            ).all()
        return [
            Charge(
                r.operation,
                int(r.credits),
                UsageStatus(r.status),
                utc(r.created_at),
                None if r.settled_at is None else utc(r.settled_at),
                r.breakdown,
            )
            for r in rows
        ]

    async def unreferenced_holds(
        self, operation: str, older_than: datetime
    ) -> list[tuple[str, str]]:
        """(project, idempotency key) of holds made before `older_than` that no reference
        was ever attached to (for sponsorships: signed, never sent through the service)."""
        async with self.engine.connect() as db:
            rows = (
                await db.execute(
                    select(usage_events.c.project_id, usage_events.c.idempotency_key).where(
                        usage_events.c.operation == operation,
                        usage_events.c.status == UsageStatus.HELD.value,
                        usage_events.c.reference.is_(None),
                        usage_events.c.created_at < older_than,
                    )
                )
            ).all()
        return [(r.project_id, r.idempotency_key) for r in rows]

    async def owns(self, project_id: str, idempotency_key: str) -> bool:
        """Whether the project has a usage event under this key (e.g. an op it sent)."""
        async with self.engine.connect() as db:
            return await postings.event(db, project_id, idempotency_key) is not None
