"""A group of accepted ops written in one PostgreSQL statement: its projects' charge plans
(`ledger_charges.ChargePlan`: usage events, draws, lot balances, overage counters) and its
intake rows (`intake.intake_row`).

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
    db: AsyncConnection, plans: Sequence[ChargePlan], intake_rows: Sequence[Mapping[str, Any]]
) -> None:
    """Write `plans` and `intake_rows` (unique, in key order) on `db`'s transaction."""
    events = [e for plan in plans for e in plan.events]
    draws = [d for plan in plans for d in plan.draws]
    lot_deltas: dict[str, int] = {}
    for plan in plans:
        for lot_id, delta in plan.lot_deltas.items():
            lot_deltas[lot_id] = lot_deltas.get(lot_id, 0) + delta
    lots = sorted(lot_deltas.items())
    overage = sorted((p.project_id, p.overage) for p in plans if p.overage)
    params: dict[str, Any] = {
        **_arrays("event", EVENT_COLUMNS, events),
        **_arrays("draw", DRAW_COLUMNS, draws),
        **_arrays("intake", INTAKE_COLUMNS, intake_rows),
        "lot_id": [lot_id for lot_id, _ in lots],
        "lot_delta": [delta for _, delta in lots],
        "overage_project": [project_id for project_id, _ in overage],
        "overage_delta": [delta for _, delta in overage],
        **{f"revived_{name}": value for name, value in REVIVED_RESET.items() if value is not None},
        "revived_when": REVIVED_WHEN,
    }
    await db.execute(_STATEMENT, params)


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
    return f"INSERT INTO {table.name} ({', '.join(columns)}) {_rows(prefix, table, columns)}"


def _statement() -> TextClause:
    lot_id, lot = _type(credit_lots.c.lot_id), credit_lots.name
    project_id, project = _type(projects.c.project_id), projects.name
    revived = [
        f"{name} = NULL" if value is None else f"{name} = :revived_{name}"
        for name, value in REVIVED_RESET.items()
    ] + [f"{name} = EXCLUDED.{name}" for name in REVIVED_FROM_NEW]
    # The schema's own names and types; every value is a bound parameter.
    return text(
        f"WITH events AS ({_insert('event', usage_events, EVENT_COLUMNS)}), "  # noqa: S608
        f"draws AS ({_insert('draw', usage_draws, DRAW_COLUMNS)}), "
        f"lots AS (UPDATE {lot} SET remaining = {lot}.remaining - d.delta "
        f"FROM unnest(CAST(:lot_id AS {lot_id}[]), CAST(:lot_delta AS BIGINT[])) "
        f"AS d(lot_id, delta) WHERE {lot}.lot_id = d.lot_id), "
        f"overage AS (UPDATE {project} SET cycle_overage = {project}.cycle_overage + o.delta "
        f"FROM unnest(CAST(:overage_project AS {project_id}[]), "
        f"CAST(:overage_delta AS BIGINT[])) AS o(project_id, delta) "
        f"WHERE {project}.project_id = o.project_id) "
        f"{_insert('intake', op_intake, INTAKE_COLUMNS)} "
        f"ON CONFLICT (chain_id, user_op_hash) DO UPDATE SET {', '.join(revived)} "
        f"WHERE {op_intake.name}.state = :revived_when"
    )


_STATEMENT = _statement()
