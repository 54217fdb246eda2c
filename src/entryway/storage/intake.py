"""The durable op intake: what an API replica accepted, for the chain's bundler leader.

An op is written here by `write_intake` inside the unit of work that charges its relay
(`Ledger.record_accepted_op`), so an op whose hash was returned is both durable and
accounted, or neither. The elected leader of the chain (`entryway bundler --chain N`) reads
the open rows (`OpIntakeStore.open_ops`), bundles them, and writes back what became of each
(`OpIntakeStore.mark`); any replica answers for an op from its row and the chain.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from sqlalchemy import BigInteger, Insert, RowMapping, any_, bindparam, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from entryway.bundler.states import OpStatus
from entryway.bundler.submission import Attempt
from entryway.domain.userop import UserOperation
from entryway.domain.userop_json import op_from_json, op_to_json
from entryway.storage import driver
from entryway.storage.ledger_group import GroupCommit
from entryway.storage.schema import op_intake
from entryway.storage.sql_lists import one_of
from entryway.storage.tasks import as_utc

OPEN = (OpStatus.PENDING.value, OpStatus.SUBMITTED.value)  # the leader still owes an outcome
STATES_PER_READ = 500


@dataclass(frozen=True, slots=True)
class IntakeRecord:
    chain_id: int
    user_op_hash: str  # 0x-prefixed, lower-case
    entry_point: str
    op: UserOperation
    project_id: str | None
    status: OpStatus
    reason: str | None
    tx_hash: str | None
    received_at: datetime
    # The API's validation (`bundler.validation.outcome_json`) and the block it was made at.
    validation: str | None = None
    validated_block: int | None = None
    attempts: tuple[Attempt, ...] = ()  # the sends of its bundle, fee bumps included


def intake_row(
    *,
    chain_id: int,
    user_op_hash: str,
    entry_point: str,
    op: UserOperation,
    project_id: str | None,
    at: datetime,
    validation: str | None = None,
    validated_block: int | None = None,
) -> dict[str, Any]:
    """An op as the intake stores it, pending, with the API's validation when given."""
    return {
        "chain_id": chain_id,
        "user_op_hash": user_op_hash.lower(),
        "entry_point": entry_point,
        "sender": op.sender,
        "nonce": str(op.nonce),
        "user_op": json.dumps(op_to_json(op), separators=(",", ":")),
        "project_id": project_id,
        "state": OpStatus.PENDING.value,
        "received_at": at,
        "updated_at": at,
        "validation": validation,
        "validated_block": validated_block,
    }


async def write_intake(
    db: AsyncConnection,
    *,
    chain_id: int,
    user_op_hash: str,
    entry_point: str,
    op: UserOperation,
    project_id: str | None,
    at: datetime,
    validation: str | None = None,
    validated_block: int | None = None,
) -> None:
    """Add an op to the intake on the caller's transaction (`write_intake_rows`)."""
    row = intake_row(
        chain_id=chain_id,
        user_op_hash=user_op_hash,
        entry_point=entry_point,
        op=op,
        project_id=project_id,
        at=at,
        validation=validation,
        validated_block=validated_block,
    )
    await write_intake_rows(db, [row])


def in_key_order(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Intake rows once each, in key order: two transactions writing some of the same ops
    then wait for each other rather than deadlock."""
    unique = {(r["chain_id"], r["user_op_hash"]): r for r in rows}
    return [dict(unique[key]) for key in sorted(unique)]


async def write_intake_rows(db: AsyncConnection, rows: Sequence[Mapping[str, Any]]) -> None:
    """Add ops (`intake_row`) to the intake on the caller's transaction, in one statement; the
    same op again (a client retrying its send) neither fails nor aborts that transaction: it
    changes nothing, unless the op was dropped, when it is pending again."""
    values = in_key_order(rows)
    if not values:
        return
    # Sent as one statement with many rows of parameters (executemany): its SQL is the same
    # whatever the number of ops, so PostgreSQL prepares it once per connection.
    await db.execute(_upsert(db.dialect.name), values)


# An op the leader dropped, sent again, is open again (its charge is not repeated: the
# relay's usage key is the op's), with its new validation; an open or finished one stays as
# it is. These columns are reset, these are taken from the op sent again, and only when the
# stored op is in this state (`_upsert`, and `ledger_at_once` on PostgreSQL).
REVIVED_RESET: dict[str, str | None] = {
    "state": OpStatus.PENDING.value,
    "reason": None,
    "tx_hash": None,
    "attempts": None,
}
REVIVED_FROM_NEW = ("updated_at", "validation", "validated_block")
REVIVED_WHEN = OpStatus.DROPPED.value


@functools.cache
def _upsert(dialect_name: str) -> Insert:
    """The statement `write_intake_rows` sends, built once per dialect (its `excluded` columns
    alone cost more to build than the statement costs to send)."""
    statement = (postgresql if dialect_name == "postgresql" else sqlite).insert(op_intake)
    revived: dict[str, Any] = dict(REVIVED_RESET)
    revived.update({name: statement.excluded[name] for name in REVIVED_FROM_NEW})
    upsert: Insert = statement.on_conflict_do_update(
        index_elements=["chain_id", "user_op_hash"],
        set_=revived,
        where=op_intake.c.state == REVIVED_WHEN,
    )
    return upsert


class Outcome(Protocol):
    """What became of an op, as the leader writes it back (`OpIntakeStore.mark_many`)."""

    @property
    def user_op_hash(self) -> str: ...

    @property
    def status(self) -> OpStatus: ...

    @property
    def tx_hash(self) -> str | None: ...

    @property
    def reason(self) -> str | None: ...

    @property
    def attempts(self) -> Sequence[Attempt]: ...


def attempts_json(attempts: Sequence[Attempt]) -> str | None:
    if not attempts:
        return None
    return json.dumps(
        [
            [a.tx_hash, str(a.max_fee_per_gas), str(a.max_priority_fee_per_gas), a.sent_at]
            for a in attempts
        ],
        separators=(",", ":"),
    )


def attempts_of(text: str | None) -> tuple[Attempt, ...]:
    if not text:
        return ()
    return tuple(Attempt(h, int(fee), int(tip), float(at)) for h, fee, tip, at in json.loads(text))


def _record(row: RowMapping) -> IntakeRecord:
    return IntakeRecord(
        chain_id=int(row["chain_id"]),
        user_op_hash=str(row["user_op_hash"]),
        entry_point=str(row["entry_point"]),
        op=op_from_json(json.loads(str(row["user_op"]))),
        project_id=None if row["project_id"] is None else str(row["project_id"]),
        status=OpStatus(str(row["state"])),
        reason=None if row["reason"] is None else str(row["reason"]),
        tx_hash=None if row["tx_hash"] is None else str(row["tx_hash"]),
        received_at=as_utc(row["received_at"]),
        validation=None if row["validation"] is None else str(row["validation"]),
        validated_block=None if row["validated_block"] is None else int(row["validated_block"]),
        attempts=attempts_of(row["attempts"]),
    )


@dataclass(frozen=True, slots=True)
class IntakeState:
    """Where an op stands in the intake, without the op: what a status or receipt poll needs."""

    chain_id: int
    user_op_hash: str
    status: OpStatus
    reason: str | None
    tx_hash: str | None
    received_at: datetime
    entry_point: str


StateKey = tuple[int, str]  # (chain id, 0x-prefixed lower-case hash)
_STATE_COLUMNS = (
    op_intake.c.chain_id,
    op_intake.c.user_op_hash,
    op_intake.c.state,
    op_intake.c.reason,
    op_intake.c.tx_hash,
    op_intake.c.received_at,
    op_intake.c.entry_point,
)
_STATES = driver.DriverStatement.of(
    select(*_STATE_COLUMNS).where(
        op_intake.c.chain_id == any_(bindparam("chains", type_=ARRAY(BigInteger))),
        op_intake.c.user_op_hash
        == any_(bindparam("hashes", type_=ARRAY(op_intake.c.user_op_hash.type))),
    )
)


class OpIntakeStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        # Clients poll hard (a receipt every 0.1 s per op): the states asked for while a read
        # is in flight are read together in the next one, one query for all of them.
        self._states: GroupCommit[StateKey, IntakeState | None] = GroupCommit(
            self._read_states, self._read_state, limit=STATES_PER_READ
        )

    async def state(self, chain_id: int, user_op_hash: str) -> IntakeState | None:
        """The op's state, read with those of other polls in flight (`_states`)."""
        return await self._states((chain_id, user_op_hash.lower()))

    async def _read_state(self, key: StateKey) -> IntakeState | None:
        return (await self._read_states([key]))[0]

    async def _read_states(self, keys: list[StateKey]) -> list[IntakeState | None]:
        chains = sorted({chain for chain, _ in keys})
        hashes = sorted({op_hash for _, op_hash in keys})
        rows: Sequence[Any]  # asyncpg's records, or SQLAlchemy's mappings: read by name
        if self.engine.dialect.name == "postgresql":
            # Every poll's read: by the driver itself (`storage.driver`), one statement and no
            # transaction around it (no BEGIN and ROLLBACK round trips either).
            rows = await driver.fetch(self.engine, _STATES, {"chains": chains, "hashes": hashes})
        else:
            dialect, c = self.engine.dialect.name, op_intake.c
            query = select(*_STATE_COLUMNS).where(
                one_of(dialect, c.chain_id, chains), one_of(dialect, c.user_op_hash, hashes)
            )
            async with self.engine.connect() as connection:
                db = await connection.execution_options(isolation_level="AUTOCOMMIT")
                rows = (await db.execute(query)).mappings().all()
        found = {
            (int(r["chain_id"]), str(r["user_op_hash"])): IntakeState(
                chain_id=int(r["chain_id"]),
                user_op_hash=str(r["user_op_hash"]),
                status=OpStatus(str(r["state"])),
                reason=None if r["reason"] is None else str(r["reason"]),
                tx_hash=None if r["tx_hash"] is None else str(r["tx_hash"]),
                received_at=as_utc(r["received_at"]),
                entry_point=str(r["entry_point"]),
            )
            for r in rows
        }
        return [found.get(key) for key in keys]

    async def add(
        self,
        *,
        chain_id: int,
        user_op_hash: str,
        entry_point: str,
        op: UserOperation,
        project_id: str | None = None,
        at: datetime | None = None,
        validation: str | None = None,
        validated_block: int | None = None,
    ) -> None:
        """An op accepted without accounting (nothing to charge), in a transaction of its own."""
        async with self.engine.begin() as db:
            await write_intake(
                db,
                chain_id=chain_id,
                user_op_hash=user_op_hash,
                entry_point=entry_point,
                op=op,
                project_id=project_id,
                at=at or datetime.now(UTC),
                validation=validation,
                validated_block=validated_block,
            )

    async def get(self, chain_id: int, user_op_hash: str) -> IntakeRecord | None:
        query = select(op_intake).where(
            op_intake.c.chain_id == chain_id, op_intake.c.user_op_hash == user_op_hash.lower()
        )
        async with self.engine.connect() as db:
            row = (await db.execute(query)).mappings().first()
        return None if row is None else _record(row)

    async def open_ops(
        self,
        chain_id: int,
        *,
        skip: frozenset[str] = frozenset(),
        limit: int = 500,
        entry_point: str | None = None,
    ) -> list[IntakeRecord]:
        """The chain's ops still owed an outcome (those sent to `entry_point`, if given),
        oldest first, but those in `skip` (already loaded by the caller)."""
        query = (
            select(op_intake)
            .where(op_intake.c.chain_id == chain_id, op_intake.c.state.in_(OPEN))
            .order_by(op_intake.c.received_at)
        )
        if entry_point is not None:
            query = query.where(op_intake.c.entry_point == entry_point)
        if skip:
            query = query.where(op_intake.c.user_op_hash.not_in(sorted(skip)))
        async with self.engine.connect() as db:
            rows = (await db.execute(query.limit(limit))).mappings().all()
        return [_record(row) for row in rows]

    async def mark(
        self,
        chain_id: int,
        user_op_hash: str,
        status: OpStatus,
        *,
        tx_hash: str | None = None,
        reason: str | None = None,
        at: datetime | None = None,
    ) -> bool:
        """Write what became of an op still open; a final outcome is never overwritten
        (False: the op was not open)."""
        statement = (
            update(op_intake)
            .where(
                op_intake.c.chain_id == chain_id,
                op_intake.c.user_op_hash == user_op_hash.lower(),
                op_intake.c.state.in_(OPEN),
            )
            .values(
                state=status.value,
                tx_hash=tx_hash,
                reason=reason,
                updated_at=at or datetime.now(UTC),
            )
        )
        async with self.engine.begin() as db:
            result = await db.execute(statement)
        return bool(result.rowcount)

    async def mark_many(
        self, chain_id: int, outcomes: Sequence[Outcome], *, at: datetime | None = None
    ) -> None:
        """`mark` for several ops in one transaction (a bundle's ops, say); as there, a final
        outcome is never overwritten."""
        if not outcomes:
            return
        statement = (
            update(op_intake)
            .where(
                op_intake.c.chain_id == chain_id,
                op_intake.c.user_op_hash == bindparam("op_hash"),
                or_(*(op_intake.c.state == state for state in OPEN)),  # no IN: executemany
            )
            .values(
                state=bindparam("new_state"),
                tx_hash=bindparam("new_tx_hash"),
                reason=bindparam("new_reason"),
                attempts=bindparam("new_attempts"),
                updated_at=at or datetime.now(UTC),
            )
        )
        params = [
            {
                "op_hash": o.user_op_hash.lower(),
                "new_state": o.status.value,
                "new_tx_hash": o.tx_hash,
                "new_reason": o.reason,
                "new_attempts": attempts_json(o.attempts),
            }
            for o in sorted(outcomes, key=lambda o: o.user_op_hash.lower())
        ]
        async with self.engine.begin() as db:
            await db.execute(statement, params)
