"""The credit ledger's postings, each on the caller's connection, inside its transaction:
locking a project, the lots a charge may draw from, drawing more or giving back for a hold
(charging itself: `ledger_charges`), and the unit-of-work runner that
retries a transaction lost to a concurrent twin or to SQLite's writer lock."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import and_, bindparam, insert, select, update
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from entryway.domain.credits import (
    CreditAccount,
    CreditLot,
    Draw,
    LotKind,
    check_amount,
)
from entryway.domain.pricebook import Quote
from entryway.storage.ledger_records import (
    LedgerError,
    UsageRecord,
    UsageStatus,
    quote_breakdown,
    utc,
)
from entryway.storage.schema import credit_lots, projects, usage_draws, usage_events

T = TypeVar("T")
_SQLITE_RETRIES = 20


@dataclass(frozen=True, slots=True)
class LockedProject:
    cycle_overage: int
    overage_budget: int | None  # the owner's spending budget; None: overage is never refused


# Built once (their construction costs more than sending them): a project's row, locked on
# PostgreSQL; its live lots, oldest first.
_PROJECT_ROW = select(projects.c.cycle_overage, projects.c.overage_budget).where(
    projects.c.project_id == bindparam("project_id")
)
_LOCKED_PROJECT_ROW = _PROJECT_ROW.with_for_update()
_LIVE_LOTS = (
    select(credit_lots)
    .where(
        credit_lots.c.project_id == bindparam("project_id"),
        credit_lots.c.remaining > 0,
        credit_lots.c.granted_at <= bindparam("until"),
        credit_lots.c.expires_at > bindparam("at"),
    )
    .order_by(credit_lots.c.granted_at, credit_lots.c.lot_id)
)


async def lock_project(db: AsyncConnection, project_id: str) -> LockedProject:
    """Serialise a project's ledger work (PostgreSQL row lock; SQLite locks the file)."""
    query = _LOCKED_PROJECT_ROW if db.dialect.name == "postgresql" else _PROJECT_ROW
    row = (await db.execute(query, {"project_id": project_id})).one_or_none()
    if row is None:
        raise LedgerError(f"unknown project {project_id}")
    budget = None if row.overage_budget is None else int(row.overage_budget)
    return LockedProject(int(row.cycle_overage), budget)


async def live_account(
    db: AsyncConnection, project_id: str, at: datetime, until: datetime | None = None
) -> CreditAccount:
    """Only the lots a charge at `at` (or any time up to `until`) can draw from, oldest
    first (FIFO); `consume` picks among them by each charge's own time."""
    bounds = {"project_id": project_id, "at": at, "until": until or at}
    rows = (await db.execute(_LIVE_LOTS, bounds)).all()
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


async def draw(
    db: AsyncConnection,
    project_id: str,
    event_id: str,
    credits: int,
    at: datetime,
) -> int:
    """Take `credits` more FIFO for an event (a settlement dearer than its hold); what no
    lot covers is overage. Returns it."""
    account = await live_account(db, project_id, at) if credits else CreditAccount()
    _, consumption = account.consume(credits, at)
    for taken in consumption.draws:
        await db.execute(
            update(credit_lots)
            .where(credit_lots.c.lot_id == taken.lot_id)
            .values(remaining=credit_lots.c.remaining - taken.credits)
        )
        await add_draw(db, event_id, taken)
    if consumption.overage:
        await shift_overage(db, project_id, event_id, consumption.overage)
    return consumption.overage


async def give_back(db: AsyncConnection, project_id: str, event_id: str, credits: int) -> None:
    """Return `credits` of an event: overage first, then lots, newest draw first."""
    overage = int(
        await db.scalar(select(usage_events.c.overage).where(usage_events.c.event_id == event_id))
        or 0
    )
    from_overage = min(overage, credits)
    if from_overage:
        await shift_overage(db, project_id, event_id, -from_overage)
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


async def add_draw(db: AsyncConnection, event_id: str, draw: Draw) -> None:
    where = and_(usage_draws.c.event_id == event_id, usage_draws.c.lot_id == draw.lot_id)
    done = await db.execute(
        update(usage_draws).where(where).values(credits=usage_draws.c.credits + draw.credits)
    )
    if not done.rowcount:
        await db.execute(
            insert(usage_draws).values(event_id=event_id, lot_id=draw.lot_id, credits=draw.credits)
        )


async def shift_overage(db: AsyncConnection, project_id: str, event_id: str, credits: int) -> None:
    """Move an event's overage and its project's cycle counter together. Giving back
    overage never takes the counter under zero (a cycle closed since has billed it)."""
    await db.execute(
        update(usage_events)
        .where(usage_events.c.event_id == event_id)
        .values(overage=usage_events.c.overage + credits)
    )
    current = int(
        await db.scalar(select(projects.c.cycle_overage).where(projects.c.project_id == project_id))
        or 0
    )
    await db.execute(
        update(projects)
        .where(projects.c.project_id == project_id)
        .values(cycle_overage=max(current + credits, 0))
    )


async def finish_hold(
    db: AsyncConnection,
    project_id: str,
    idempotency_key: str,
    actual: Quote | None,
    at: datetime,
) -> UsageRecord:
    """Settle a hold on `actual` (the difference drawn or given back), or release it whole
    (`actual` None). A hold already settled or released is left as it is (a duplicate)."""
    await lock_project(db, project_id)
    found = await event(db, project_id, idempotency_key)
    if found is None:
        raise LedgerError(f"no hold {idempotency_key!r}")
    if found.status != UsageStatus.HELD:
        return UsageRecord(
            found.event_id, found.credits, found.overage, True, UsageStatus(found.status)
        )
    target = 0 if actual is None else check_amount(actual.credits, "a settlement")
    delta = target - int(found.credits)
    if delta > 0:
        await draw(db, project_id, found.event_id, delta, at)
    elif delta < 0:
        await give_back(db, project_id, found.event_id, -delta)
    status = UsageStatus.RELEASED if actual is None else UsageStatus.SETTLED
    values: dict[str, Any] = {"credits": target, "status": status.value, "settled_at": at}
    if actual is not None:
        values["breakdown"] = quote_breakdown(actual)
    await db.execute(
        update(usage_events).where(usage_events.c.event_id == found.event_id).values(**values)
    )
    overage = await db.scalar(
        select(usage_events.c.overage).where(usage_events.c.event_id == found.event_id)
    )
    return UsageRecord(found.event_id, target, int(overage or 0), False, status)


async def event(db: AsyncConnection, project_id: str, idempotency_key: str) -> Any:
    return (
        await db.execute(
            select(usage_events).where(
                usage_events.c.project_id == project_id,
                usage_events.c.idempotency_key == idempotency_key,
            )
        )
    ).one_or_none()


async def link(db: AsyncConnection, project_id: str, idempotency_key: str, reference: str) -> bool:
    done = await db.execute(
        update(usage_events)
        .where(
            usage_events.c.project_id == project_id,
            usage_events.c.idempotency_key == idempotency_key,
        )
        .values(reference=reference)
    )
    return bool(done.rowcount)


async def run_unit(engine: AsyncEngine, work: Callable[[AsyncConnection], Awaitable[T]]) -> T:
    """Run `work` in one transaction. A concurrent twin winning the idempotency race
    (IntegrityError) or SQLite's writer lock (OperationalError) rolls ours back whole;
    the retry then finds the twin's result or gets the lock."""
    for attempt in range(_SQLITE_RETRIES):
        try:
            async with engine.begin() as db:
                return await work(db)
        except IntegrityError:
            if attempt:
                raise
        except OperationalError as exc:
            if "locked" not in str(exc) or attempt == _SQLITE_RETRIES - 1:
                raise
    raise AssertionError("unreachable")


async def run_unit_fresh_first(
    engine: AsyncEngine, work: Callable[[AsyncConnection, bool], Awaitable[T]]
) -> T:
    """`run_unit` for work that may first take its idempotency keys for fresh (`work(db,
    True)`, sparing the read of the keys charged before): a key charged before fails that
    attempt (IntegrityError) and the unit runs as `run_unit` runs it (`work(db, False)`)."""
    try:
        async with engine.begin() as db:
            return await work(db, True)
    except IntegrityError:
        pass
    except OperationalError as exc:
        if "locked" not in str(exc):
            raise

    async def checked(db: AsyncConnection) -> T:
        return await work(db, False)

    return await run_unit(engine, checked)
