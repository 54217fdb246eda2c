"""A group of accepted ops written in one PostgreSQL statement: its projects' charge plans
(`ledger_charges.ChargePlan`: usage events, draws, lot balances, overage counters) and its
intake rows (`intake.intake_row`), if every lot the plans draw on still holds what they draw.

The statement first locks the charged projects, in project order, as every unit of the
ledger does, then the lots it draws on, in lot order; a lock it waited for gives the row
as the unit that held it left it. It writes only if each of those lots still holds at least
what the plans draw from it, and otherwise answers False and writes nothing. So a plan read
without the lock (`ledger_accepted.write_unlocked`) is written as if the project's charges
in between had come after it, or not at all; a plan read under the lock always holds. Read
without the lock (or planned from the lots as the process last saw them, `lots_seen`) and
written by a statement that is its own transaction, a group costs one or two round trips
and holds the locks only while the statement runs, not across the turns of the API's event
loop between statements.

Each statement of a transaction is a round trip, and in a burst of sends each round trip
waits for a turn of the API's busy event loop; written a table at a time, an accepted op's
writes took four. Here every table's rows go as arrays, one per column, unnested into rows
by data-modifying WITH clauses: the SQL is the same whatever the group's size, so
PostgreSQL prepares it once per connection. Every part runs to completion whether or not
the statement reads it, and the foreign keys (a draw's event, written in the same statement)
are checked when the statement ends. A usage key charged before fails the whole statement
(IntegrityError), as the events' own insert would. SQLite, which has no data-modifying WITH,
writes the same plans a statement at a time (`ledger_charges.write_plan`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Column, Table, TextClause, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncConnection

from entryway.storage import driver
from entryway.storage.intake import REVIVED_FROM_NEW, REVIVED_RESET, REVIVED_WHEN
from entryway.storage.ledger_charges import ChargePlan
from entryway.storage.schema import credit_lots, op_intake, projects, usage_draws, usage_events

EVENT_COLUMNS = (
    "event_id", "project_id", "idempotency_key", "operation", "credits", "overage",
    "created_at", "key_id", "endpoint", "chain_id", "subject", "policy_id", "reference",
    "status", "breakdown", "settled_at",
)  # fmt: skip
DRAW_COLUMNS = ("event_id", "lot_id", "credits")
INTAKE_COLUMNS = (
    "chain_id", "user_op_hash", "entry_point", "sender", "nonce", "user_op", "project_id",
    "state", "received_at", "updated_at", "validation", "validated_block",
)  # fmt: skip


async def write_at_once(
    db: AsyncConnection,
    plans: Sequence[ChargePlan],
    intake_rows: Sequence[Mapping[str, Any]],
    *,
    by_driver: bool = False,
) -> bool:
    """Write `plans` and `intake_rows` (unique, in key order) on `db`'s transaction, if every
    lot drawn on holds what the plans draw from it; whether they were written. `by_driver`:
    run by asyncpg itself (`storage.driver`), for a statement that is its own transaction
    (every accepted op's, `ledger_accepted.write_unlocked`)."""
    events = [e for plan in plans for e in plan.events]
    draws = [d for plan in plans for d in plan.draws]
    lot_deltas: dict[str, int] = {}
    for plan in plans:
        for lot_id, delta in plan.lot_deltas.items():
            lot_deltas[lot_id] = lot_deltas.get(lot_id, 0) + delta
    lots = sorted(lot_deltas.items())
    charged = sorted((p.project_id, p.overage) for p in plans if p.events)
    params: dict[str, Any] = {
        **_arrays("event", EVENT_COLUMNS, events),
        **_arrays("draw", DRAW_COLUMNS, draws),
        **_arrays("intake", INTAKE_COLUMNS, intake_rows),
        "lot_id": [lot_id for lot_id, _ in lots],
        "lot_delta": [delta for _, delta in lots],
        "lot_count": len(lots),
        "plan_project": [project_id for project_id, _ in charged],
        "plan_overage": [overage for _, overage in charged],
        "plan_count": len(charged),
        **{f"revived_{name}": value for name, value in REVIVED_RESET.items() if value is not None},
        "revived_when": REVIVED_WHEN,
    }
    if by_driver:
        (row,) = await driver.fetch_on(db, _BY_DRIVER, params)
        return bool(row[0])
    return bool(await db.scalar(_STATEMENT, params))


def _arrays(
    prefix: str, columns: Sequence[str], rows: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    if rows and set(rows[0]) != set(columns):  # a column added to one side only
        raise ValueError(f"{prefix} rows carry {sorted(rows[0])}, not {sorted(columns)}")
    return {f"{prefix}_{name}": [row[name] for row in rows] for name in columns}


def _type(column: Column[Any]) -> str:
    compiled: object = column.type.compile(dialect=postgresql.dialect())  # type: ignore[no-untyped-call]
    return str(compiled)


def _rows(prefix: str, table: Table, columns: Sequence[str]) -> str:
    """The rows sent as one array per column (`_arrays`), as a SELECT."""
    arrays = ", ".join(f"CAST(:{prefix}_{c} AS {_type(table.c[c])}[])" for c in columns)
    return f"SELECT * FROM unnest({arrays})"  # noqa: S608 (the schema's names, no input)


def _insert(prefix: str, table: Table, columns: Sequence[str]) -> str:
    """The rows inserted if the statement goes ahead (`ready`)."""
    rows = _rows(prefix, table, columns)
    names = ", ".join(columns)
    return f"INSERT INTO {table.name} ({names}) {rows} WHERE (SELECT ok FROM ready)"  # noqa: S608


def _statement() -> TextClause:
    lot_id, lot = _type(credit_lots.c.lot_id), credit_lots.name
    project_id, project = _type(projects.c.project_id), projects.name
    revived = [
        f"{name} = NULL" if value is None else f"{name} = :revived_{name}"
        for name, value in REVIVED_RESET.items()
    ] + [f"{name} = EXCLUDED.{name}" for name in REVIVED_FROM_NEW]
    charged = (
        f"unnest(CAST(:plan_project AS {project_id}[]), CAST(:plan_overage AS BIGINT[])) "
        f"AS p(project_id, overage)"
    )
    drawn = f"unnest(CAST(:lot_id AS {lot_id}[]), CAST(:lot_delta AS BIGINT[])) AS d(lot_id, delta)"
    every_project = "(SELECT count(*) FROM locked) = :plan_count"
    # The schema's own names and types; every value is a bound parameter. The projects are
    # locked before the lots (`held` reads `locked` whole first), as in every ledger unit.
    return text(
        f"WITH locked AS MATERIALIZED (SELECT project_id FROM {project} "  # noqa: S608
        f"WHERE project_id = ANY(CAST(:plan_project AS {project_id}[])) "
        f"ORDER BY project_id FOR UPDATE), "
        f"held AS MATERIALIZED (SELECT {lot}.lot_id FROM {lot} JOIN {drawn} "
        f"ON {lot}.lot_id = d.lot_id WHERE {every_project} AND {lot}.remaining >= d.delta "
        f"ORDER BY {lot}.lot_id FOR UPDATE OF {lot}), "
        f"ready AS MATERIALIZED (SELECT {every_project} "
        f"AND (SELECT count(*) FROM held) = :lot_count AS ok), "
        f"overage AS (UPDATE {project} SET cycle_overage = {project}.cycle_overage + p.overage "
        f"FROM {charged}, ready WHERE {project}.project_id = p.project_id "
        f"AND p.overage <> 0 AND ready.ok), "
        f"events AS ({_insert('event', usage_events, EVENT_COLUMNS)}), "
        f"draws AS ({_insert('draw', usage_draws, DRAW_COLUMNS)}), "
        f"lots AS (UPDATE {lot} SET remaining = {lot}.remaining - d.delta "
        f"FROM {drawn}, ready WHERE {lot}.lot_id = d.lot_id AND ready.ok), "
        f"intake AS ({_insert('intake', op_intake, INTAKE_COLUMNS)} "
        f"ON CONFLICT (chain_id, user_op_hash) DO UPDATE SET {', '.join(revived)} "
        f"WHERE {op_intake.name}.state = :revived_when) "
        f"SELECT ok FROM ready"
    )


_STATEMENT = _statement()
_BY_DRIVER = driver.DriverStatement.of(_STATEMENT)
