"""The credit ledger in the database. Each public method is one unit of work: a usage event,
the lot postings it causes and the project's overage counter commit together or not at all.

Holds: a sponsored operation is charged its estimate when sponsored (status `held`), then
settled on the actual cost from its receipt (the difference drawn or given back), or released
in full when it never lands. Credits given back return to the lots they came from, newest
draw first, and overage is given back before any lot.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TypeVar

from sqlalchemy import and_, insert, select, update
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from entryway.domain.credits import CreditAccount, CreditError, CreditLot, Draw, LotKind
from entryway.domain.pricebook import Quote
from entryway.storage.schema import credit_lots, projects, usage_draws, usage_events

T = TypeVar("T")
_SQLITE_RETRIES = 20


class UsageStatus(StrEnum):
    HELD = "held"
    SETTLED = "settled"
    RELEASED = "released"


class LedgerError(CreditError):
    pass


@dataclass(frozen=True, slots=True)
class UsageContext:
    """Where a charge came from, for the breakdowns and the sponsorship counters."""

    key_id: str | None = None
    endpoint: str | None = None
    chain_id: int | None = None
    subject: str | None = None  # a sender or wallet address
    policy_id: str | None = None
    reference: str | None = None  # what a client may ask the credits of (a userOpHash)


@dataclass(frozen=True, slots=True)
class Charge:
    """One charge to make: `record_usage`'s arguments, for `record_many`."""

    project_id: str
    idempotency_key: str
    operation: str
    credits: int
    at: datetime
    context: UsageContext | None = None
    quote: Quote | None = None
    status: UsageStatus = UsageStatus.SETTLED


@dataclass(frozen=True, slots=True)
class UsageRecord:
    event_id: str
    credits: int
    overage: int
    duplicate: bool  # the idempotency key was seen before: nothing was charged again
    status: UsageStatus = UsageStatus.SETTLED


def utc(moment: datetime) -> datetime:
    """SQLite hands datetimes back naive; they were stored as UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def lot_row(lot: CreditLot) -> dict[str, Any]:
    return {
        "lot_id": lot.lot_id,
        "kind": lot.kind.value,
        "amount": lot.amount,
        "remaining": lot.remaining,
        "granted_at": lot.granted_at,
        "expires_at": lot.expires_at,
    }


def _breakdown(quote: Quote | None) -> str | None:
    return None if quote is None else json.dumps(dict(quote.breakdown))


class Ledger:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

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
        """A bought lot, valid 12 months; `purchase_id` (the payment's reference) dedupes."""
        lot = CreditLot.new(f"purchase-{purchase_id}", LotKind.PURCHASE, credits, at)
        return await self.add_lot(project_id, lot)

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

    async def _live_account(
        self, db: AsyncConnection, project_id: str, at: datetime, until: datetime | None = None
    ) -> CreditAccount:
        """Only the lots a charge at `at` (or any time up to `until`) can draw from, oldest
        first (FIFO); `consume` picks among them by each charge's own time."""
        rows = (
            await db.execute(
                select(credit_lots)
                .where(
                    credit_lots.c.project_id == project_id,
                    credit_lots.c.remaining > 0,
                    credit_lots.c.granted_at <= (until or at),
                    credit_lots.c.expires_at > at,
                )
                .order_by(credit_lots.c.granted_at, credit_lots.c.lot_id)
            )
        ).all()
        lots = tuple(
            CreditLot(
                r.lot_id,
                LotKind(r.kind),
                r.amount,
                r.remaining,
                utc(r.granted_at),
                utc(r.expires_at),
            )
            for r in rows
        )
        return CreditAccount(lots=lots)

    async def _lock_project(self, db: AsyncConnection, project_id: str) -> int:
        """Serialise a project's ledger work (PostgreSQL row lock; SQLite locks the file)."""
        query = select(projects.c.cycle_overage).where(projects.c.project_id == project_id)
        if db.dialect.name == "postgresql":
            query = query.with_for_update()
        overage = (await db.execute(query)).scalar_one_or_none()
        if overage is None:
            raise LedgerError(f"unknown project {project_id}")
        return int(overage)

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
                done.update(await self._charge_project(db, project_id, batch))
            return [done[i] for i in range(len(charges))]

        try:
            async with self.engine.begin() as db:
                return await work(db)
        except (IntegrityError, OperationalError):
            return [await self._one(c) for c in charges]

    async def _charge_project(
        self, db: AsyncConnection, project_id: str, batch: list[tuple[int, Charge]]
    ) -> dict[int, UsageRecord]:
        keys = {c.idempotency_key for _, c in batch}
        known = {
            r.idempotency_key: UsageRecord(
                r.event_id, r.credits, r.overage, True, UsageStatus(r.status)
            )
            for r in (
                await db.execute(
                    select(usage_events).where(
                        usage_events.c.project_id == project_id,
                        usage_events.c.idempotency_key.in_(keys),
                    )
                )
            ).all()
        }
        fresh = [c.at for _, c in batch if c.idempotency_key not in known]
        done: dict[int, UsageRecord] = {}
        account = CreditAccount()
        if fresh:
            await self._lock_project(db, project_id)
            account = await self._live_account(db, project_id, min(fresh), max(fresh))
        events: list[dict[str, Any]] = []
        draws: list[dict[str, Any]] = []
        lot_deltas: dict[str, int] = {}
        overage_total = 0
        for i, c in batch:
            if c.idempotency_key in known:  # charged before, or earlier in this batch
                done[i] = replace(known[c.idempotency_key], duplicate=True)
                continue
            account, used = account.consume(c.credits, c.at)
            event_id = str(uuid.uuid4())
            ctx = c.context or UsageContext()
            events.append(
                {
                    "event_id": event_id, "project_id": project_id,
                    "idempotency_key": c.idempotency_key, "operation": c.operation,
                    "credits": c.credits, "overage": used.overage, "created_at": c.at,
                    "key_id": ctx.key_id, "endpoint": ctx.endpoint, "chain_id": ctx.chain_id,
                    "subject": ctx.subject, "policy_id": ctx.policy_id,
                    "reference": ctx.reference, "status": c.status.value,
                    "breakdown": _breakdown(c.quote),
                    "settled_at": c.at if c.status is UsageStatus.SETTLED else None,
                }
            )  # fmt: skip
            for draw in used.draws:
                draws.append({"event_id": event_id, "lot_id": draw.lot_id, "credits": draw.credits})
                lot_deltas[draw.lot_id] = lot_deltas.get(draw.lot_id, 0) + draw.credits
            overage_total += used.overage
            done[i] = known[c.idempotency_key] = UsageRecord(
                event_id, c.credits, used.overage, False, c.status
            )
        if events:
            await db.execute(insert(usage_events), events)
        if draws:
            await db.execute(insert(usage_draws), draws)
        for lot_id, delta in lot_deltas.items():
            await db.execute(
                update(credit_lots)
                .where(credit_lots.c.lot_id == lot_id)
                .values(remaining=credit_lots.c.remaining - delta)
            )
        if overage_total:
            await db.execute(
                update(projects)
                .where(projects.c.project_id == project_id)
                .values(cycle_overage=projects.c.cycle_overage + overage_total)
            )
        return done

    async def _one(self, charge: Charge) -> UsageRecord:
        async def work(db: AsyncConnection) -> UsageRecord:
            done = await self._charge_project(db, charge.project_id, [(0, charge)])
            return done[0]

        return await self._unit(work)

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
            await self._lock_project(db, project_id)
            event = await self._event(db, project_id, idempotency_key)
            if event is None:
                raise LedgerError(f"no hold {idempotency_key!r}")
            if event.status != UsageStatus.HELD:
                return UsageRecord(
                    event.event_id, event.credits, event.overage, True, UsageStatus(event.status)
                )
            target = 0 if actual is None else actual.credits
            delta = target - int(event.credits)
            if delta > 0:
                await self._draw(db, project_id, event.event_id, delta, at)
            elif delta < 0:
                await self._give_back(db, project_id, event.event_id, -delta)
            status = UsageStatus.RELEASED if actual is None else UsageStatus.SETTLED
            values: dict[str, Any] = {"credits": target, "status": status.value, "settled_at": at}
            if actual is not None:
                values["breakdown"] = _breakdown(actual)
            await db.execute(
                update(usage_events)
                .where(usage_events.c.event_id == event.event_id)
                .values(**values)
            )
            overage = await db.scalar(
                select(usage_events.c.overage).where(usage_events.c.event_id == event.event_id)
            )
            return UsageRecord(event.event_id, target, int(overage or 0), False, status)

        return await self._unit(work)

    async def link(self, project_id: str, idempotency_key: str, reference: str) -> bool:
        """Attach a reference to an existing event (a sponsorship hold, once its op is sent)."""
        async with self.engine.begin() as db:
            done = await db.execute(
                update(usage_events)
                .where(
                    usage_events.c.project_id == project_id,
                    usage_events.c.idempotency_key == idempotency_key,
                )
                .values(reference=reference)
            )
        return bool(done.rowcount)

    async def credits_for(self, project_id: str, reference: str) -> tuple[int, bool]:
        """The credits charged under a reference, and whether all of it is final (no hold
        still waiting for its receipt)."""
        async with self.engine.connect() as db:
            rows = (
                await db.execute(
                    select(usage_events.c.credits, usage_events.c.status).where(
                        usage_events.c.project_id == project_id,
                        usage_events.c.reference == reference,
                    )
                )
            ).all()
        final = all(r.status != UsageStatus.HELD for r in rows)
        return sum(int(r.credits) for r in rows), final

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
            return await self._event(db, project_id, idempotency_key) is not None

    # ------------------------------------------------------------- postings

    async def _draw(
        self,
        db: AsyncConnection,
        project_id: str,
        event_id: str,
        credits: int,
        at: datetime,
    ) -> int:
        """Take `credits` more FIFO for an event (a settlement dearer than its hold); what no
        lot covers is overage. Returns it."""
        account = await self._live_account(db, project_id, at) if credits else CreditAccount()
        _, consumption = account.consume(credits, at)
        for draw in consumption.draws:
            await db.execute(
                update(credit_lots)
                .where(credit_lots.c.lot_id == draw.lot_id)
                .values(remaining=credit_lots.c.remaining - draw.credits)
            )
            await self._add_draw(db, event_id, draw)
        if consumption.overage:
            await self._shift_overage(db, project_id, event_id, consumption.overage)
        return consumption.overage

    async def _give_back(
        self, db: AsyncConnection, project_id: str, event_id: str, credits: int
    ) -> None:
        """Return `credits` of an event: overage first, then lots, newest draw first."""
        overage = int(
            await db.scalar(
                select(usage_events.c.overage).where(usage_events.c.event_id == event_id)
            )
            or 0
        )
        from_overage = min(overage, credits)
        if from_overage:
            await self._shift_overage(db, project_id, event_id, -from_overage)
        left = credits - from_overage
        draws = (
            await db.execute(
                select(usage_draws, credit_lots.c.granted_at)
                .join(credit_lots, credit_lots.c.lot_id == usage_draws.c.lot_id)
                .where(usage_draws.c.event_id == event_id)
                .order_by(credit_lots.c.granted_at.desc(), credit_lots.c.lot_id.desc())
            )
        ).all()
        for d in draws:
            if not left:
                break
            back = min(left, int(d.credits))
            left -= back
            await db.execute(
                update(credit_lots)
                .where(credit_lots.c.lot_id == d.lot_id)
                .values(remaining=credit_lots.c.remaining + back)
            )
            await db.execute(
                update(usage_draws)
                .where(and_(usage_draws.c.event_id == event_id, usage_draws.c.lot_id == d.lot_id))
                .values(credits=usage_draws.c.credits - back)
            )
        if left:
            raise LedgerError(f"event {event_id} has {left} credits fewer than it gives back")

    @staticmethod
    async def _add_draw(db: AsyncConnection, event_id: str, draw: Draw) -> None:
        where = and_(usage_draws.c.event_id == event_id, usage_draws.c.lot_id == draw.lot_id)
        done = await db.execute(
            update(usage_draws).where(where).values(credits=usage_draws.c.credits + draw.credits)
        )
        if not done.rowcount:
            await db.execute(
                insert(usage_draws).values(
                    event_id=event_id, lot_id=draw.lot_id, credits=draw.credits
                )
            )

    @staticmethod
    async def _shift_overage(
        db: AsyncConnection, project_id: str, event_id: str, credits: int
    ) -> None:
        """Move an event's overage and its project's cycle counter together. Giving back
        overage never takes the counter under zero (a cycle closed since has billed it)."""
        await db.execute(
            update(usage_events)
            .where(usage_events.c.event_id == event_id)
            .values(overage=usage_events.c.overage + credits)
        )
        current = int(
            await db.scalar(
                select(projects.c.cycle_overage).where(projects.c.project_id == project_id)
            )
            or 0
        )
        await db.execute(
            update(projects)
            .where(projects.c.project_id == project_id)
            .values(cycle_overage=max(current + credits, 0))
        )

    @staticmethod
    async def _event(db: AsyncConnection, project_id: str, idempotency_key: str) -> Any:
        return (
            await db.execute(
                select(usage_events).where(
                    usage_events.c.project_id == project_id,
                    usage_events.c.idempotency_key == idempotency_key,
                )
            )
        ).one_or_none()

    async def _unit(self, work: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        """Run `work` in one transaction. A concurrent twin winning the idempotency race
        (IntegrityError) or SQLite's writer lock (OperationalError) rolls ours back whole;
        the retry then finds the twin's result or gets the lock."""
        for attempt in range(_SQLITE_RETRIES):
            try:
                async with self.engine.begin() as db:
                    return await work(db)
            except IntegrityError:
                if attempt:
                    raise
            except OperationalError as exc:
                if "locked" not in str(exc) or attempt == _SQLITE_RETRIES - 1:
                    raise
        raise AssertionError("unreachable")
