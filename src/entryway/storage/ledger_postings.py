"""The credit ledger's postings, each on the caller's connection, inside its transaction:
locking a project, the lots a charge may draw from, charging (usage events, FIFO draws, the
overage counter), drawing more or giving back for a hold, and the unit-of-work runner that
retries a transaction lost to a concurrent twin or to SQLite's writer lock."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import Select, and_, bindparam, insert, select, update
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from entryway.domain.credits import (
    CreditAccount,
    CreditLot,
    Draw,
    LotKind,
    check_amount,
    check_hold,
)
from entryway.domain.pricebook import Quote
from entryway.storage.ledger_records import (
    Charge,
    LedgerError,
    UsageContext,
    UsageRecord,
    UsageStatus,
    quote_breakdown,
    utc,
)
from entryway.storage.schema import credit_lots, projects, usage_draws, usage_events
from entryway.storage.sql_lists import one_of

T = TypeVar("T")
_SQLITE_RETRIES = 20


@dataclass(frozen=True, slots=True)
class _LockedProject:
    cycle_overage: int
    overage_budget: int | None  # the owner's spending budget; None: overage is never refused


async def lock_project(db: AsyncConnection, project_id: str) -> _LockedProject:
    """Serialise a project's ledger work (PostgreSQL row lock; SQLite locks the file)."""
    query = select(projects.c.cycle_overage, projects.c.overage_budget).where(
        projects.c.project_id == project_id
    )
    if db.dialect.name == "postgresql":
        query = query.with_for_update()
    row = (await db.execute(query)).one_or_none()
    if row is None:
        raise LedgerError(f"unknown project {project_id}")
    budget = None if row.overage_budget is None else int(row.overage_budget)
    return _LockedProject(int(row.cycle_overage), budget)


async def live_account(
    db: AsyncConnection, project_id: str, at: datetime, until: datetime | None = None
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


async def lock_with_lots(
    db: AsyncConnection, project_id: str, at: datetime, until: datetime
) -> tuple[_LockedProject, CreditAccount]:
    """`lock_project` and `live_account` (from `at` up to `until`) in one round trip: the
    project's row, locked, joined to its live lots."""
    rows = (
        await db.execute(
            _LOCKED_WITH_LOTS[db.dialect.name == "postgresql"],
            {"project_id": project_id, "at": at, "until": until},
        )
    ).all()
    if not rows:
        raise LedgerError(f"unknown project {project_id}")
    budget = rows[0].overage_budget
    locked = _LockedProject(int(rows[0].cycle_overage), None if budget is None else int(budget))
    lots = tuple(
        CreditLot(
            r.lot_id, LotKind(r.kind), r.amount, r.remaining, utc(r.granted_at), utc(r.expires_at)
        )
        for r in rows
        if r.lot_id is not None  # a project with no live lot: its row alone
    )
    return locked, CreditAccount(lots=lots)


def _locked_with_lots(for_update: bool) -> Select[Any]:
    live = and_(
        credit_lots.c.project_id == projects.c.project_id,
        credit_lots.c.remaining > 0,
        credit_lots.c.granted_at <= bindparam("until"),
        credit_lots.c.expires_at > bindparam("at"),
    )
    query = (
        select(projects.c.cycle_overage, projects.c.overage_budget, credit_lots)
        .select_from(projects.outerjoin(credit_lots, live))
        .where(projects.c.project_id == bindparam("project_id"))
        .order_by(credit_lots.c.granted_at, credit_lots.c.lot_id)
    )
    # PostgreSQL locks the project's row alone (the lots are written under that lock);
    # SQLite locks the file.
    return query.with_for_update(of=projects) if for_update else query


# Built once: (SQLite's, PostgreSQL's).
_LOCKED_WITH_LOTS = (_locked_with_lots(False), _locked_with_lots(True))


async def charge_project(
    db: AsyncConnection,
    project_id: str,
    batch: list[tuple[int, Charge]],
    *,
    assume_fresh: bool = False,
) -> dict[int, UsageRecord]:
    """Charge a project's share of a batch (`Ledger.record_many`): its known keys read at
    once, its lots once, events, draws and lot updates written in bulk.

    `assume_fresh` skips the read of the known keys, a round trip: a key charged before then
    fails the events' insert (IntegrityError) and the caller, which must roll back, runs the
    unit again without it (`run_unit_fresh_first` runs both attempts)."""
    known = {} if assume_fresh else await _known(db, project_id, batch)
    fresh = [c.at for _, c in batch if c.idempotency_key not in known]
    for _, c in batch:
        check_amount(c.credits, f"the charge {c.idempotency_key}")
    done: dict[int, UsageRecord] = {}
    account = CreditAccount()
    locked = _LockedProject(0, None)
    if fresh:
        locked, account = await lock_with_lots(db, project_id, min(fresh), max(fresh))
    events: list[dict[str, Any]] = []
    draws: list[dict[str, Any]] = []
    lot_deltas: dict[str, int] = {}
    overage_total = 0
    for i, c in batch:
        if c.idempotency_key in known:  # charged before, or earlier in this batch
            done[i] = replace(known[c.idempotency_key], duplicate=True)
            continue
        account, used = account.consume(c.credits, c.at)
        if c.status is UsageStatus.HELD:  # an estimate: refused only past the owner's budget
            overage = locked.cycle_overage + overage_total
            check_hold(c.credits, used.overage, overage, locked.overage_budget)
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
                "breakdown": quote_breakdown(c.quote),
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


async def _known(
    db: AsyncConnection, project_id: str, batch: list[tuple[int, Charge]]
) -> dict[str, UsageRecord]:
    """The batch's keys charged before, with what they were charged."""
    keys = sorted({c.idempotency_key for _, c in batch})
    rows = await db.execute(
        select(usage_events).where(
            usage_events.c.project_id == project_id,
            one_of(db.dialect.name, usage_events.c.idempotency_key, keys),
        )
    )
    return {
        r.idempotency_key: UsageRecord(
            r.event_id, r.credits, r.overage, True, UsageStatus(r.status)
        )
        for r in rows.all()
    }


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
