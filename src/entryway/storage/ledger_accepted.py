"""Accepted ops in the ledger: what `Ledger.record_accepted_op` writes for each op, on the
caller's transaction, for one op or a group of them (`ledger_group`).

Per op: its relay charge (a usage event drawing on its project's lots, once per usage key),
and, when the service's paymaster sponsors it, its hold linked to the op's hash and its
settlement task; on a chain bundled through the intake, the op itself. A group makes a few
statements in all, not a few per op: each project's lock and its lots
(`ledger_charges.plan_charges`), then every charge and intake row in one statement on
PostgreSQL (`ledger_at_once`), or a statement per table on SQLite.

Order, so that two transactions never deadlock: the projects are locked first, one at a time
in project order (as every ledger unit of work locks its project first), then the charges and
the intake rows are written, then the tasks and the links, each table in key order.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncConnection

from entryway.paymaster.ports import AcceptedOp
from entryway.storage import ledger_charges as charges
from entryway.storage import ledger_postings as postings
from entryway.storage.intake import in_key_order, intake_row, write_intake_rows
from entryway.storage.ledger_at_once import write_at_once
from entryway.storage.ledger_records import Charge, UsageContext, UsageRecord
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
    by_project: dict[str, list[tuple[int, Charge]]] = {}
    for i, accepted in enumerate(group):
        by_project.setdefault(accepted.project_id, []).append((i, relay_charge(accepted)))
    done: dict[int, UsageRecord] = {}
    plans: list[charges.ChargePlan] = []
    for project_id in sorted(by_project):
        plan = await charges.plan_charges(
            db, project_id, by_project[project_id], assume_fresh=assume_fresh
        )
        plans.append(plan)
        done.update(plan.done)
    rows = in_key_order(
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
    if db.dialect.name == "postgresql":
        await write_at_once(db, plans, rows)
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
