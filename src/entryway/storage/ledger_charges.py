"""Charging a project, in two steps on the caller's transaction: `plan_charges` reads (the
keys charged before, the project's lock and its live lots) and decides each
charge's event, draws and overage (`decide`); `write_plan` writes what the plan decided.
`charge_project` does both. A group of accepted ops writes its plans with its intake rows in
one statement on PostgreSQL instead (`ledger_at_once`), first from a read without the lock
(`read_unlocked`), written only if every lot it draws on still holds what it draws."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from sqlalchemy import Select, and_, bindparam, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from entryway.domain.credits import CreditAccount, CreditLot, LotKind, check_amount, check_hold
from entryway.storage.ledger_postings import LockedProject, live_account, lock_project
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


@dataclass
class ChargePlan:
    """What charging a project's batch writes: its usage events, their draws on its lots,
    each lot's total draw and the overage the project's cycle counter gains; each
    charge's record, by its index in the batch; and the lots as the plan leaves them."""

    project_id: str
    account: CreditAccount = field(default_factory=CreditAccount)
    done: dict[int, UsageRecord] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    draws: list[dict[str, Any]] = field(default_factory=list)
    lot_deltas: dict[str, int] = field(default_factory=dict)
    overage: int = 0


async def charge_project(
    db: AsyncConnection,
    project_id: str,
    batch: list[tuple[int, Charge]],
    *,
    assume_fresh: bool = False,
) -> dict[int, UsageRecord]:
    """Charge a project's share of a batch (`Ledger.record_many`): `plan_charges`, then
    `write_plan`; each charge's record, by its index in the batch."""
    plan = await plan_charges(db, project_id, batch, assume_fresh=assume_fresh)
    await write_plan(db, plan)
    return plan.done


async def plan_charges(
    db: AsyncConnection,
    project_id: str,
    batch: list[tuple[int, Charge]],
    *,
    assume_fresh: bool = False,
) -> ChargePlan:
    """Read what a project's share of a batch needs, its keys charged before at once, its lock
    and its lots (`lock_with_lots`), and decide each charge (FIFO draws, overage, a hold refused
    past the owner's budget). The project stays locked until the transaction ends.

    `assume_fresh` skips the read of the known keys, a round trip: a key charged before then
    fails the events' insert (IntegrityError) and the caller, which must roll back, runs the
    unit again without it (`ledger_postings.run_unit_fresh_first` runs both attempts)."""
    known = {} if assume_fresh else await _known(db, project_id, batch)
    fresh = [c.at for _, c in batch if c.idempotency_key not in known]
    account = CreditAccount()
    locked = LockedProject(0, None)
    if fresh:
        locked, account = await lock_with_lots(db, project_id, min(fresh), max(fresh))
    return decide(project_id, batch, known, locked, account)


def decide(
    project_id: str,
    batch: list[tuple[int, Charge]],
    known: dict[str, UsageRecord],
    locked: LockedProject,
    account: CreditAccount,
) -> ChargePlan:
    """Each charge's event, draws and overage, from the project as read (`known`: the keys
    charged before, with their records; it gains the batch's own). A charge that is not a
    whole number of credits of at least 0 is refused (`CreditError`) before anything is
    written."""
    for _, c in batch:
        check_amount(c.credits, f"the charge {c.idempotency_key}")
    plan = ChargePlan(project_id)
    for i, c in batch:
        if c.idempotency_key in known:  # charged before, or earlier in this batch
            plan.done[i] = replace(known[c.idempotency_key], duplicate=True)
            continue
        account, used = account.consume(c.credits, c.at)
        if c.status is UsageStatus.HELD:  # an estimate: refused only past the owner's budget
            overage = locked.cycle_overage + plan.overage
            check_hold(c.credits, used.overage, overage, locked.overage_budget)
        event_id = str(uuid.uuid4())
        ctx = c.context or UsageContext()
        plan.events.append(
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
            plan.draws.append(
                {"event_id": event_id, "lot_id": draw.lot_id, "credits": draw.credits}
            )
            plan.lot_deltas[draw.lot_id] = plan.lot_deltas.get(draw.lot_id, 0) + draw.credits
        plan.overage += used.overage
        plan.done[i] = known[c.idempotency_key] = UsageRecord(
            event_id, c.credits, used.overage, False, c.status
        )
    plan.account = account
    return plan


async def write_plan(db: AsyncConnection, plan: ChargePlan) -> None:
    """Write a plan, a statement per table (and per lot drawn on)."""
    if plan.events:
        await db.execute(insert(usage_events), plan.events)
    if plan.draws:
        await db.execute(insert(usage_draws), plan.draws)
    for lot_id, delta in plan.lot_deltas.items():
        await db.execute(
            update(credit_lots)
            .where(credit_lots.c.lot_id == lot_id)
            .values(remaining=credit_lots.c.remaining - delta)
        )
    if plan.overage:
        await db.execute(
            update(projects)
            .where(projects.c.project_id == plan.project_id)
            .values(cycle_overage=projects.c.cycle_overage + plan.overage)
        )


async def lock_with_lots(
    db: AsyncConnection, project_id: str, at: datetime, until: datetime
) -> tuple[LockedProject, CreditAccount]:
    """The project locked (`ledger_postings.lock_project`), then its lots live from `at` up to
    `until` (`live_account`).

    On PostgreSQL these are two statements: a statement reads the rows as they were when it
    began, so lots read by the statement that waited for the lock would miss what the
    transaction holding it wrote. SQLite, where a transaction that read before another one
    wrote cannot write (it is run again), reads both in one query."""
    if db.dialect.name == "postgresql":
        locked = await lock_project(db, project_id)
        return locked, await live_account(db, project_id, at, until)
    return await read_unlocked(db, project_id, at, until)


async def read_unlocked(
    db: AsyncConnection, project_id: str, at: datetime, until: datetime
) -> tuple[LockedProject, CreditAccount]:
    """The project's row and its lots live from `at` up to `until`, in one query and without
    a lock (on SQLite, the transaction's own writer lock guards them)."""
    rows = (
        await db.execute(_WITH_LOTS, {"project_id": project_id, "at": at, "until": until})
    ).all()
    if not rows:
        raise LedgerError(f"unknown project {project_id}")
    budget = rows[0].overage_budget
    locked = LockedProject(int(rows[0].cycle_overage), None if budget is None else int(budget))
    lots = tuple(
        CreditLot(
            r.lot_id, LotKind(r.kind), r.amount, r.remaining, utc(r.granted_at), utc(r.expires_at)
        )
        for r in rows
        if r.lot_id is not None  # a project with no live lot: its row alone
    )
    return locked, CreditAccount(lots=lots)


def _with_lots() -> Select[Any]:
    live = and_(
        credit_lots.c.project_id == projects.c.project_id,
        credit_lots.c.remaining > 0,
        credit_lots.c.granted_at <= bindparam("until"),
        credit_lots.c.expires_at > bindparam("at"),
    )
    return (
        select(projects.c.cycle_overage, projects.c.overage_budget, credit_lots)
        .select_from(projects.outerjoin(credit_lots, live))
        .where(projects.c.project_id == bindparam("project_id"))
        .order_by(credit_lots.c.granted_at, credit_lots.c.lot_id)
    )


_WITH_LOTS = _with_lots()  # built once


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
