"""Accepted ops in the ledger: what `Ledger.record_accepted_op` writes for each op, on the
caller's transaction, for one op or a group of them (`ledger_group`).

Per op: its relay charge (a usage event drawing on its project's lots, once per usage key),
and, when the service's paymaster sponsors it, its hold linked to the op's hash and its
settlement task; on a chain bundled through the intake, the op itself. A group makes a few
statements in all, not a few per op: each project's lock and its lots
(`ledger_charges.plan_charges`), then every charge and intake row in one statement on
PostgreSQL (`ledger_at_once`), or a statement per table on SQLite.

On PostgreSQL a group with no sponsored op is first tried without a transaction
(`write_unlocked`): each project's lots read without its lock (or as this process saw them a
moment ago, `lots_seen`), then that one statement, which writes only if every lot it draws on
still holds what it draws.

Order, so that two transactions never deadlock: the projects are locked first, one at a time
in project order (as every ledger unit of work locks its project first), then the charges and
the intake rows are written, then the tasks and the links, each table in key order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from entryway.paymaster.ports import AcceptedOp
from entryway.storage import driver
from entryway.storage import ledger_charges as charges
from entryway.storage import ledger_postings as postings
from entryway.storage.intake import in_key_order, intake_row, write_intake_rows
from entryway.storage.ledger_at_once import write_at_once
from entryway.storage.ledger_postings import LockedProject
from entryway.storage.ledger_records import Charge, LedgerError, UsageContext, UsageRecord
from entryway.storage.lots_seen import LotsSeen, Seen
from entryway.storage.tasks import TaskQueue


def relay_charge(accepted: AcceptedOp) -> Charge:
    return Charge(
        accepted.project_id,
        accepted.usage_key,
        accepted.relay.operation.value,
        accepted.relay.credits,
        accepted.at,
        UsageContext(
            accepted.key_id,
            accepted.endpoint,
            accepted.chain_id,
            accepted.sender,
            reference=accepted.user_op_hash,
        ),
        accepted.relay,
    )


async def write_accepted(
    db: AsyncConnection,
    queue: TaskQueue,
    group: Sequence[AcceptedOp],
    *,
    assume_fresh: bool = False,
) -> list[UsageRecord]:
    """Record `group` on `db`'s transaction; each op's record, in `group`'s order.
    `assume_fresh`: as `ledger_charges.plan_charges` takes it."""
    by_project = _by_project(group)
    done: dict[int, UsageRecord] = {}
    plans: list[charges.ChargePlan] = []
    for project_id in sorted(by_project):
        plan = await charges.plan_charges(
            db, project_id, by_project[project_id], assume_fresh=assume_fresh
        )
        plans.append(plan)
        done.update(plan.done)
    rows = _intake_rows(group)
    if db.dialect.name == "postgresql":
        if not await write_at_once(db, plans, rows):  # read under the lock: it always holds
            raise LedgerError("a lot drawn on holds less than read under the project's lock")
    else:
        for plan in plans:
            await charges.write_plan(db, plan)
        await write_intake_rows(db, rows)
    sponsored = sorted(
        (a for a in group if a.settlement is not None),
        key=lambda a: (a.project_id, a.usage_key),
    )
    for accepted in sponsored:
        follow = accepted.settlement
        assert follow is not None
        await queue.enqueue_in(
            db,
            follow.kind,
            follow.payload,
            project_id=accepted.project_id,
            run_at=follow.run_at,
            idempotency_key=follow.idempotency_key,
            max_attempts=follow.max_attempts,
        )
    links = sorted(
        (a.project_id, a.settlement.hold_key, a.user_op_hash)
        for a in sponsored
        if a.settlement is not None
    )
    for project_id, hold_key, op_hash in links:
        await postings.link(db, project_id, hold_key, op_hash)
    return [done[i] for i in range(len(group))]


def may_write_unlocked(engine: AsyncEngine, group: Sequence[AcceptedOp]) -> bool:
    """Whether `write_unlocked` tries `group`: on PostgreSQL, when no op of it is sponsored."""
    return engine.dialect.name == "postgresql" and not any(a.settlement for a in group)


async def write_unlocked(
    engine: AsyncEngine, group: Sequence[AcceptedOp], seen: LotsSeen
) -> list[UsageRecord] | None:
    """Record `group` on PostgreSQL in one or two round trips and no transaction: each
    project's row and lots read in one query without its lock (or as `seen` a moment ago),
    then every write in one statement that goes ahead only if every lot drawn on still holds
    what the group draws from it (`ledger_at_once`). Each op's record, in `group`'s order;
    None when the group was not written (a sponsored op, whose link and task need a
    transaction; a lot drawn down in between): the caller then writes it under the lock
    (`write_accepted`). A key charged before (a client sending an op again) raises the
    insert's IntegrityError, nothing written: the caller reads the keys first then."""
    if not may_write_unlocked(engine, group):
        return None
    by_project = _by_project(group)
    async with driver.connected(engine) as db:
        await db.execution_options(isolation_level="AUTOCOMMIT")
        plans: list[tuple[charges.ChargePlan, Seen]] = []
        for project_id in sorted(by_project):
            plans.append(await _plan(db, project_id, by_project[project_id], seen))
        try:
            written = await write_at_once(
                db, [p for p, _ in plans], _intake_rows(group), by_driver=True
            )
        except IntegrityError:  # a key charged before: the caller's keyed attempt finds it
            for plan, _ in plans:
                seen.forget(plan.project_id)
            raise
    for plan, was in plans:
        if not written:
            seen.forget(plan.project_id)
            continue
        overage = was.locked.cycle_overage + plan.overage
        locked = LockedProject(overage, was.locked.overage_budget)
        seen.wrote(plan.project_id, was, Seen(locked, plan.account, was.read_at))
    if not written:
        return None
    done = {i: record for plan, _ in plans for i, record in plan.done.items()}
    return [done[i] for i in range(len(group))]


async def _plan(
    db: AsyncConnection, project_id: str, batch: list[tuple[int, Charge]], seen: LotsSeen
) -> tuple[charges.ChargePlan, Seen]:
    """A project's plan, from its lots as seen a moment ago unless that plan would charge
    overage (then, as from every plan without them, from a fresh read)."""
    was = seen.get(project_id)
    if was is not None:
        plan = charges.decide(project_id, batch, {}, was.locked, was.account)
        if not plan.overage:
            return plan, was
    ats = [c.at for _, c in batch]
    read_at = seen.now()
    locked, account = await charges.read_unlocked(db, project_id, min(ats), max(ats))
    was = Seen(locked, account, read_at)
    return charges.decide(project_id, batch, {}, locked, account), was


def _by_project(group: Sequence[AcceptedOp]) -> dict[str, list[tuple[int, Charge]]]:
    """Each project's relay charges, by the op's index in `group`."""
    by_project: dict[str, list[tuple[int, Charge]]] = {}
    for i, accepted in enumerate(group):
        by_project.setdefault(accepted.project_id, []).append((i, relay_charge(accepted)))
    return by_project


def _intake_rows(group: Sequence[AcceptedOp]) -> list[dict[str, Any]]:
    return in_key_order(
        [
            intake_row(
                chain_id=a.chain_id,
                user_op_hash=a.user_op_hash,
                entry_point=a.intake.entry_point,
                op=a.intake.op,
                project_id=a.project_id,
                at=a.at,
                validation=a.intake.validation,
                validated_block=a.intake.validated_block,
            )
            for a in group
            if a.intake is not None
        ]
    )
