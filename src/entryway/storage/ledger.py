"""The credit ledger in the database. Each public method is one unit of work: a usage event,
the lot postings it causes and the project's overage counter commit together or not at all.

Holds: a sponsored operation is charged its estimate when sponsored (status `held`), then
settled on the actual cost from its receipt (the difference drawn or given back), or released
in full when it never lands. Credits given back return to the lots they came from, newest
draw first, and overage is given back before any lot. A hold the project cannot cover — more
than its lots hold plus what its plan's overage ceiling leaves of the cycle — is refused
(`CreditCeilingError`), as is any amount beyond what the database stores.

The postings live in `ledger_postings`, the reads in `ledger_queries`, the records in
`ledger_records` (re-exported here).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from entryway.domain.billing import BillingConfig
from entryway.domain.credits import CreditLot, LotKind, check_amount
from entryway.domain.pricebook import Quote
from entryway.paymaster.ports import AcceptedOp
from entryway.storage import ledger_postings as postings
from entryway.storage.ledger_accepted import write_accepted
from entryway.storage.ledger_group import GroupCommit
from entryway.storage.ledger_queries import LedgerQueries
from entryway.storage.ledger_records import (
    Charge,
    IdempotencyKeyReusedError,
    LedgerError,
    UsageContext,
    UsageRecord,
    UsageStatus,
    lot_row,
    purchase_lot_id,
    quote_breakdown,
    utc,
)
from entryway.storage.schema import credit_lots, usage_events
from entryway.storage.tasks import TaskQueue

__all__ = [
    "Charge",
    "IdempotencyKeyReusedError",
    "Ledger",
    "LedgerError",
    "UsageContext",
    "UsageRecord",
    "UsageStatus",
    "lot_row",
    "purchase_lot_id",
    "utc",
]


class Ledger(LedgerQueries):
    def __init__(self, engine: AsyncEngine, config: BillingConfig | None = None) -> None:
        super().__init__(engine)
        self.config = config or BillingConfig()  # the plans' overage ceilings
        self._accepted = GroupCommit(self.record_accepted_ops, self._record_accepted_alone)

    # ------------------------------------------------------------------ lots

    async def add_lot(self, project_id: str, lot: CreditLot) -> bool:
        """Add a lot once: a second add of the same lot id changes nothing (False)."""
        try:
            async with self.engine.begin() as db:
                await db.execute(insert(credit_lots).values(project_id=project_id, **lot_row(lot)))
        except IntegrityError:
            return False
        return True

    async def purchase(self, project_id: str, purchase_id: str, credits: int, at: datetime) -> bool:
        """A bought lot, valid 12 months; `purchase_id` (the payment's reference) dedupes:
        the same purchase again adds nothing (False); the same id for another project or
        amount is refused (IdempotencyKeyReusedError), never taken for the first one."""
        lot = CreditLot.new(purchase_lot_id(purchase_id), LotKind.PURCHASE, credits, at)
        if await self.add_lot(project_id, lot):
            return True
        async with self.engine.connect() as db:
            first = (
                await db.execute(
                    select(
                        credit_lots.c.project_id, credit_lots.c.kind, credit_lots.c.amount
                    ).where(credit_lots.c.lot_id == lot.lot_id)
                )
            ).one_or_none()
        if first is None:
            raise LedgerError(f"purchase {purchase_id} could not be recorded")
        if (first.project_id, first.kind, int(first.amount)) != (project_id, lot.kind, credits):
            raise IdempotencyKeyReusedError(
                f"purchase id {purchase_id} was recorded before for another purchase"
            )
        return False

    # ------------------------------------------------------------ charging

    async def record_usage(
        self,
        project_id: str,
        idempotency_key: str,
        operation: str,
        credits: int,
        at: datetime,
        context: UsageContext | None = None,
        *,
        quote: Quote | None = None,
        status: UsageStatus = UsageStatus.SETTLED,
    ) -> UsageRecord:
        """Charge `credits` FIFO from the project's lots, once per idempotency key."""
        return await self._one(
            Charge(project_id, idempotency_key, operation, credits, at, context, quote, status)
        )

    async def record_many(self, charges: Sequence[Charge]) -> list[UsageRecord]:
        """Several charges in one transaction (group commit): each as `record_usage` would
        make it, all committed together, in a few statements per project (its known keys
        read at once, its lots once, events, draws and lot updates written in bulk).
        Projects are locked in one order, so two processes doing this never deadlock. If the
        batch fails (say, a twin charge committed by another process first), it rolls back
        whole and each charge is made on its own."""
        by_project: dict[str, list[int]] = {}
        for i, charge in enumerate(charges):
            by_project.setdefault(charge.project_id, []).append(i)

        async def work(db: AsyncConnection) -> list[UsageRecord]:
            done: dict[int, UsageRecord] = {}
            for project_id in sorted(by_project):
                batch = [(i, charges[i]) for i in by_project[project_id]]
                done.update(await postings.charge_project(db, self.config, project_id, batch))
            return [done[i] for i in range(len(charges))]

        try:
            async with self.engine.begin() as db:
                return await work(db)
        except (IntegrityError, OperationalError):
            return [await self._one(c) for c in charges]

    async def _one(self, charge: Charge) -> UsageRecord:
        async def work(db: AsyncConnection) -> UsageRecord:
            done = await postings.charge_project(db, self.config, charge.project_id, [(0, charge)])
            return done[0]

        return await postings.run_unit(self.engine, work)

    # --------------------------------------------------------------- holds

    async def hold(
        self,
        project_id: str,
        idempotency_key: str,
        quote: Quote,
        at: datetime,
        *,
        key_id: str | None = None,
        endpoint: str | None = None,
        chain_id: int | None = None,
        subject: str | None = None,
        policy_id: str | None = None,
    ) -> UsageRecord:
        """Charge an estimate now; `settle` or `release` it later."""
        ctx = UsageContext(key_id, endpoint, chain_id, subject, policy_id)
        return await self.record_usage(
            project_id,
            idempotency_key,
            quote.operation.value,
            quote.credits,
            at,
            ctx,
            quote=quote,
            status=UsageStatus.HELD,
        )

    async def settle(
        self, project_id: str, idempotency_key: str, actual: Quote, at: datetime
    ) -> UsageRecord:
        """Replace a hold's estimate by the actual cost. Settling twice changes nothing."""
        return await self._finish(project_id, idempotency_key, actual, at)

    async def release(self, project_id: str, idempotency_key: str, at: datetime) -> UsageRecord:
        """Give a hold back whole: the operation never landed."""
        return await self._finish(project_id, idempotency_key, None, at)

    async def _finish(
        self, project_id: str, idempotency_key: str, actual: Quote | None, at: datetime
    ) -> UsageRecord:
        async def work(db: AsyncConnection) -> UsageRecord:
            await postings.lock_project(db, project_id, self.config)
            event = await postings.event(db, project_id, idempotency_key)
            if event is None:
                raise LedgerError(f"no hold {idempotency_key!r}")
            if event.status != UsageStatus.HELD:
                return UsageRecord(
                    event.event_id, event.credits, event.overage, True, UsageStatus(event.status)
                )
            target = 0 if actual is None else check_amount(actual.credits, "a settlement")
            delta = target - int(event.credits)
            if delta > 0:
                await postings.draw(db, project_id, event.event_id, delta, at)
            elif delta < 0:
                await postings.give_back(db, project_id, event.event_id, -delta)
            status = UsageStatus.RELEASED if actual is None else UsageStatus.SETTLED
            values: dict[str, Any] = {"credits": target, "status": status.value, "settled_at": at}
            if actual is not None:
                values["breakdown"] = quote_breakdown(actual)
            await db.execute(
                update(usage_events)
                .where(usage_events.c.event_id == event.event_id)
                .values(**values)
            )
            overage = await db.scalar(
                select(usage_events.c.overage).where(usage_events.c.event_id == event.event_id)
            )
            return UsageRecord(event.event_id, target, int(overage or 0), False, status)

        return await postings.run_unit(self.engine, work)

    async def link(self, project_id: str, idempotency_key: str, reference: str) -> bool:
        """Attach a reference to an existing event (a sponsorship hold, once its op is sent)."""
        async with self.engine.begin() as db:
            return await postings.link(db, project_id, idempotency_key, reference)

    async def record_accepted_op(self, accepted: AcceptedOp) -> UsageRecord:
        """An accepted op's relay charge, its hold's link, its settlement task and, on a chain
        whose ops go through the durable intake, the op itself, in one transaction
        (`paymaster.relay_accounting`): any of them failing rolls back all. Ops accepted
        concurrently share that transaction (group commit, `ledger_group`); if it fails, each
        is recorded in one of its own."""
        return await self._accepted(accepted)

    async def record_accepted_ops(self, group: Sequence[AcceptedOp]) -> list[UsageRecord]:
        """Several accepted ops in one transaction (`ledger_accepted`): all, or none."""
        queue = TaskQueue(self.engine)

        async def work(db: AsyncConnection) -> list[UsageRecord]:
            return await write_accepted(db, self.config, queue, group)

        return await postings.run_unit(self.engine, work)

    async def _record_accepted_alone(self, accepted: AcceptedOp) -> UsageRecord:
        return (await self.record_accepted_ops([accepted]))[0]
