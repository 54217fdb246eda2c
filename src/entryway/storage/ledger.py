"""The credit ledger in the database. Each public method is one unit of work: a usage event,
the lot postings it causes and the project's overage counter commit together or not at all.

Holds: a sponsored operation is charged its estimate when sponsored (status `held`), then
settled on the actual cost from its receipt (the difference drawn or given back), or released
in full when it never lands. Credits given back return to the lots they came from, newest
draw first, and overage is given back before any lot. A hold is refused only when it would
take the cycle's overage past the spending budget the project's owner chose
(`BudgetExceededError`), and any amount beyond what the database stores is refused too.

The postings live in `ledger_postings`, the reads in `ledger_queries`, the records in
`ledger_records` (re-exported here).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum

from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from entryway.domain.credits import CreditLot, LotKind
from entryway.domain.pricebook import Quote
from entryway.paymaster.inclusions import Inclusion, Reversal
from entryway.paymaster.ports import AcceptedOp
from entryway.storage import ledger_postings as postings
from entryway.storage import ledger_reorgs as reorgs
from entryway.storage.ledger_accepted import may_write_unlocked, write_accepted, write_unlocked
from entryway.storage.ledger_charges import charge_project
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
    utc,
)
from entryway.storage.lots_seen import LotsSeen
from entryway.storage.schema import credit_lots
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


ACCEPTED_GROUPS_AT_ONCE = 4  # accepted groups written side by side (PostgreSQL)


class AcceptedWrite(StrEnum):
    """How an accepted group was written: in one statement without the project's lock
    (PostgreSQL); under the lock after that statement found a lot drawn down since its read,
    or found an op charged before (a client sending it again); or under the lock from the
    start (SQLite, or a group with a sponsored op)."""

    AT_ONCE = "at_once"
    LOT_DRAWN = "lot_drawn"
    CHARGED_BEFORE = "charged_before"
    UNDER_LOCK = "under_lock"


class Ledger(LedgerQueries):
    def __init__(self, engine: AsyncEngine) -> None:
        super().__init__(engine)
        # PostgreSQL writes an accepted group in one statement holding no lock across round
        # trips (`ledger_at_once`): groups go side by side. SQLite has one writer.
        depth = ACCEPTED_GROUPS_AT_ONCE if engine.dialect.name == "postgresql" else 1
        self._accepted = GroupCommit(
            self.record_accepted_ops, self._record_accepted_alone, depth=depth
        )
        self._lots_seen = LotsSeen()  # the accepted groups' last read of each project's lots
        # How this process wrote its accepted groups (`record_accepted_ops`), for /metrics.
        self.accepted_writes: Counter[AcceptedWrite] = Counter()

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
                done.update(await charge_project(db, project_id, batch))
            return [done[i] for i in range(len(charges))]

        try:
            async with self.engine.begin() as db:
                return await work(db)
        except (IntegrityError, OperationalError):
            return [await self._one(c) for c in charges]

    async def _one(self, charge: Charge) -> UsageRecord:
        async def work(db: AsyncConnection) -> UsageRecord:
            done = await charge_project(db, charge.project_id, [(0, charge)])
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
            return await postings.finish_hold(db, project_id, idempotency_key, actual, at)

        return await postings.run_unit(self.engine, work)

    # ------------------------------------------------------------ reorgs

    async def settle_included(
        self, project_id: str, hold_key: str, actual: Quote, at: datetime, inclusion: Inclusion
    ) -> UsageRecord:
        """`settle`, recording the block the op was mined in (`ledger_reorgs`); a hold whose
        settlements a reorg all reversed settles again."""

        async def work(db: AsyncConnection) -> UsageRecord:
            return await reorgs.settle_included(db, project_id, hold_key, actual, at, inclusion)

        return await postings.run_unit(self.engine, work)

    async def reverse_in_blocks(
        self,
        chain_id: int,
        block_numbers: Sequence[int],
        at: datetime,
        follow_up: reorgs.FollowUp | None = None,
    ) -> list[Reversal]:
        """Reverse every settlement standing on an op mined in these blocks of the chain,
        each in a unit of work of its own with `follow_up`; the reversals made."""
        async with self.engine.connect() as db:
            standing = await reorgs.standing_in_blocks(db, chain_id, block_numbers)
        done = []
        for event_id in standing:

            async def work(db: AsyncConnection, event_id: str = event_id) -> Reversal | None:
                return await reorgs.reverse(db, event_id, at, follow_up)

            reversal = await postings.run_unit(self.engine, work)
            if reversal is not None:
                done.append(reversal)
        return done

    async def finalize(self, chain_id: int, up_to_block: int) -> int:
        """The chain's settlements mined up to `up_to_block` are final; how many became so."""
        async with self.engine.begin() as db:
            return await reorgs.finalize(db, chain_id, up_to_block)

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

        async def work(db: AsyncConnection, assume_fresh: bool) -> list[UsageRecord]:
            return await write_accepted(db, queue, group, assume_fresh=assume_fresh)

        async def keyed(db: AsyncConnection) -> list[UsageRecord]:
            return await work(db, False)

        try:
            written = await write_unlocked(self.engine, group, self._lots_seen)
        except IntegrityError:  # an op charged before: its key is read, as a duplicate
            self.accepted_writes[AcceptedWrite.CHARGED_BEFORE] += 1
            return await postings.run_unit(self.engine, keyed)
        if written is not None:
            self.accepted_writes[AcceptedWrite.AT_ONCE] += 1
            return written
        if may_write_unlocked(self.engine, group):
            self.accepted_writes[AcceptedWrite.LOT_DRAWN] += 1
        else:
            self.accepted_writes[AcceptedWrite.UNDER_LOCK] += 1
        # An op's relay is charged once per op hash: a charge seen before is a client sending
        # the same op again, rare enough to pay a second attempt for.
        return await postings.run_unit_fresh_first(self.engine, work)

    async def _record_accepted_alone(self, accepted: AcceptedOp) -> UsageRecord:
        return (await self.record_accepted_ops([accepted]))[0]
