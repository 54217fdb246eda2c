"""Accepted ops that arrive together share one transaction (SQLite and PostgreSQL): each is
charged exactly once and written to the intake, in fewer transactions than ops; an op that
fails does not sink the others of its group, and leaves nothing behind."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Connection, event, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from entryway.bundler.leader import Outcome
from entryway.bundler.states import OpStatus
from entryway.domain.credits import CreditLot, LotKind
from entryway.domain.pricebook import default_price_book
from entryway.paymaster.ports import AcceptedOp, IntakeEntry
from entryway.paymaster.relay_accounting import op_usage_key
from entryway.storage import driver
from entryway.storage import ledger as ledger_module
from entryway.storage import ledger_charges as charges
from entryway.storage.intake import OpIntakeStore
from entryway.storage.ledger import LedgerError
from entryway.storage.ledger_at_once import write_at_once
from entryway.storage.ledger_charges import ChargePlan
from entryway.storage.ledger_records import Charge
from entryway.storage.schema import credit_lots, op_intake, usage_events
from entryway.storage.store import Store
from tests.integration.storage.test_relay_accounting import CHAIN, NOW, project, user_op

ENTRY_POINT = "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108"
OPS = 24
Draws = list[tuple[str, int]]


def accepted_op(pid: str, n: int) -> AcceptedOp:
    op = replace(user_op(sponsored=False), nonce=n)
    op_hash = "0x" + f"{n:064x}"
    return AcceptedOp(
        project_id=pid,
        usage_key=op_usage_key(CHAIN, op_hash),
        user_op_hash=op_hash,
        relay=default_price_book().relayed_user_operation(
            calls=1, calldata_bytes=len(op.call_data), sponsored=False
        ),
        at=NOW,
        key_id=None,
        endpoint="rpc:eth_sendUserOperation",
        chain_id=CHAIN,
        sender=op.sender,
        settlement=None,
        intake=IntakeEntry(ENTRY_POINT, op),
    )


async def charges_and_rows(engine: AsyncEngine) -> tuple[dict[str, int], int]:
    async with engine.connect() as db:
        keys = (
            await db.execute(
                select(usage_events.c.idempotency_key, func.count()).group_by(
                    usage_events.c.idempotency_key
                )
            )
        ).all()
        rows = await db.scalar(select(func.count()).select_from(op_intake))
    return {str(k): int(n) for k, n in keys}, int(rows or 0)


async def test_ops_accepted_together_share_transactions_and_are_each_charged_once(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(engine)
    pid = await project(store)
    before = (await store.credit_account(pid)).balance(NOW)
    ledger = store.ledger
    groups: list[int] = []
    record_group = ledger.record_accepted_ops
    record_alone = ledger._accepted.one

    async def counted(group: list[AcceptedOp]) -> object:
        groups.append(len(group))
        return await record_group(group)

    async def alone(accepted: AcceptedOp) -> object:
        groups.append(1)  # a caller that found no group under way writes its own
        return await record_alone(accepted)

    monkeypatch.setattr(ledger._accepted, "many", counted)
    monkeypatch.setattr(ledger._accepted, "one", alone)
    ops = [accepted_op(pid, n) for n in range(OPS)]
    records = await asyncio.gather(*(ledger.record_accepted_op(a) for a in ops))
    assert sum(groups) == OPS and len(groups) < OPS // 2
    retried = await asyncio.gather(*(ledger.record_accepted_op(a) for a in ops[:5]))

    assert not any(r.duplicate for r in records)
    assert all(r.duplicate for r in retried)
    charged, rows = await charges_and_rows(engine)
    assert charged == {a.usage_key: 1 for a in ops}
    assert rows == OPS
    spent = sum(r.credits for r in records)
    assert (await store.credit_account(pid)).balance(NOW) == before - spent
    open_ops = await OpIntakeStore(engine).open_ops(CHAIN)
    assert {r.user_op_hash for r in open_ops} == {a.user_op_hash for a in ops}
    assert all(r.status is OpStatus.PENDING for r in open_ops)


async def test_an_op_that_fails_does_not_sink_the_others_of_its_group(
    engine: AsyncEngine,
) -> None:
    store = Store(engine)
    pid = await project(store)
    ledger = store.ledger
    ops = [accepted_op(pid, n) for n in range(OPS)]
    doomed = replace(accepted_op("no-such-project", OPS), project_id="no-such-project")
    group = [*ops[: OPS // 2], doomed, *ops[OPS // 2 :]]
    outcomes = await asyncio.gather(
        *(ledger.record_accepted_op(a) for a in group), return_exceptions=True
    )
    assert isinstance(outcomes[OPS // 2], LedgerError)
    assert all(not isinstance(o, BaseException) for i, o in enumerate(outcomes) if i != OPS // 2)
    charged, rows = await charges_and_rows(engine)
    assert charged == {a.usage_key: 1 for a in ops}  # the failed op charged nothing
    assert rows == OPS  # nor entered the intake
    assert await OpIntakeStore(engine).get(CHAIN, doomed.user_op_hash) is None


async def test_a_group_is_all_or_nothing(engine: AsyncEngine) -> None:
    store = Store(engine)
    pid = await project(store)
    group = [accepted_op(pid, 1), accepted_op("no-such-project", 2)]
    with pytest.raises(LedgerError):
        await store.ledger.record_accepted_ops(group)
    assert await charges_and_rows(engine) == ({}, 0)


async def test_the_leader_writes_back_many_outcomes_at_once(engine: AsyncEngine) -> None:
    store = Store(engine)
    pid = await project(store)
    await store.ledger.record_accepted_ops([accepted_op(pid, n) for n in (1, 2, 3)])
    intake = OpIntakeStore(engine)
    tx = "0x" + "cd" * 32
    hashes = ["0x" + f"{n:064x}" for n in (1, 2, 3)]
    assert await intake.mark(CHAIN, hashes[2], OpStatus.DROPPED, reason="nonce already used")
    await intake.mark_many(
        CHAIN,
        [
            Outcome(hashes[0], OpStatus.INCLUDED, tx, None),
            Outcome(hashes[1], OpStatus.SUBMITTED, tx, None),
            Outcome(hashes[2], OpStatus.INCLUDED, tx, None),  # final stays final
        ],
    )
    got = [await intake.get(CHAIN, h) for h in hashes]
    assert [g.status if g else None for g in got] == [
        OpStatus.INCLUDED,
        OpStatus.SUBMITTED,
        OpStatus.DROPPED,
    ]
    assert got[0] is not None and got[0].tx_hash == tx
    assert got[2] is not None and got[2].reason == "nonce already used"
    assert [r.user_op_hash for r in await intake.open_ops(CHAIN)] == [hashes[1]]


async def test_a_group_is_written_without_reading_its_keys_first_unless_one_was_charged(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first attempt takes the group's usage keys for fresh (a round trip spared); an op
    charged before fails it, and the group is written again with the keys read: the op
    charged before is a duplicate, the others are charged once."""
    store = Store(engine)
    pid = await project(store)
    reads: list[int] = []
    known = charges._known

    async def counted(*args: object) -> object:
        reads.append(1)
        return await known(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(charges, "_known", counted)
    ops = [accepted_op(pid, n) for n in range(6)]
    first = await store.ledger.record_accepted_ops(ops[:3])
    assert reads == []  # fresh keys: no read
    before = (await store.credit_account(pid)).balance(NOW)
    mixed = await store.ledger.record_accepted_ops([ops[1], *ops[3:]])
    assert reads == [1]  # ops[1] failed the first attempt; the second read the keys
    assert [r.duplicate for r in mixed] == [True, False, False, False]
    assert mixed[0].event_id == first[1].event_id
    charged, rows = await charges_and_rows(engine)
    assert charged == {a.usage_key: 1 for a in ops}
    assert rows == len(ops)
    spent = sum(r.credits for r in mixed[1:])
    assert (await store.credit_account(pid)).balance(NOW) == before - spent


@pytest.mark.parametrize("engine", ["postgresql"], indirect=True)
async def test_a_duplicate_found_by_the_statement_without_the_lock_is_written_with_keys_read(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL an op charged before fails the one statement (its key): the group goes
    straight to the attempt that reads its keys, not first to another that takes them for
    fresh and fails the same way."""
    store = Store(engine)
    pid = await project(store)
    attempts: list[bool] = []
    write = ledger_module.write_accepted

    async def counted(*args: Any, assume_fresh: bool) -> Any:
        attempts.append(assume_fresh)
        return await write(*args, assume_fresh=assume_fresh)

    monkeypatch.setattr(ledger_module, "write_accepted", counted)
    ops = [accepted_op(pid, n) for n in range(3)]
    first = await store.ledger.record_accepted_ops(ops[:2])
    assert attempts == []  # written by the one statement
    again = await store.ledger.record_accepted_ops([ops[1], ops[2]])
    assert attempts == [False]
    assert [r.duplicate for r in again] == [True, False]
    assert again[0].event_id == first[1].event_id
    charged, rows = await charges_and_rows(engine)
    assert charged == {a.usage_key: 1 for a in ops} and rows == len(ops)


async def test_an_accepted_op_is_written_in_as_few_statements_as_the_database_allows(
    engine: AsyncEngine,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each statement of the accept's transaction is a round trip the client waits for.
    PostgreSQL reads the project and its lots in one, without a lock or a transaction (no
    BEGIN, no COMMIT: each statement commits itself), and takes every write in one
    (`ledger_at_once`); SQLite reads the lock and the lots in one and writes a statement per
    table: the usage event, its draw, the lot's new balance, the intake row."""
    store = Store(engine)
    pid = await project(store)
    sent: list[str] = []
    own_transaction: list[bool] = []

    def count(conn: Connection, cursor: object, statement: str, *args: object) -> None:
        sent.append(statement.split()[0].upper())
        dbapi = conn.connection.dbapi_connection
        own_transaction.append(getattr(dbapi, "isolation_level", None) == "autocommit")

    event.listen(engine.sync_engine, "before_cursor_execute", count)
    by_driver(monkeypatch, sent, own_transaction)
    try:
        await store.ledger.record_accepted_ops([accepted_op(pid, 1)])
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", count)
    if engine.dialect.name == "postgresql":  # the project and its lots, the writes
        assert sent == ["SELECT", "WITH"]
        assert own_transaction == [True, True]
    else:
        assert sent == ["SELECT", "INSERT", "INSERT", "UPDATE", "INSERT"]


async def test_a_project_without_live_lots_is_locked_and_charged_as_overage(
    engine: AsyncEngine,
) -> None:
    """The lock and the lots in one query: a project whose lots are spent still answers (its
    row alone), and an unknown project is refused."""
    store = Store(engine)
    pid = await project(store)
    async with engine.begin() as db:
        await db.execute(update(credit_lots).values(remaining=0))
    async with engine.begin() as db:
        locked, account = await charges.lock_with_lots(db, pid, NOW, NOW)
        assert account.lots == () and locked.cycle_overage == 0
        with pytest.raises(LedgerError):
            await charges.lock_with_lots(db, "no-such-project", NOW, NOW)
    [record] = await store.ledger.record_accepted_ops([accepted_op(pid, 2)])
    assert record.overage == record.credits > 0
    async with engine.begin() as db:
        locked, _ = await charges.lock_with_lots(db, pid, NOW, NOW)
    assert locked.cycle_overage == record.overage  # the cycle's counter moved with it


async def test_a_group_of_two_projects_charges_each_its_own_lots(engine: AsyncEngine) -> None:
    store = Store(engine)
    first, second = await project(store), await project(store)
    before = {p: (await store.credit_account(p)).balance(NOW) for p in (first, second)}
    ops = [accepted_op(first, 1), accepted_op(second, 2), accepted_op(first, 3)]
    records = await store.ledger.record_accepted_ops(ops)
    spent = {first: records[0].credits + records[2].credits, second: records[1].credits}
    for p in (first, second):
        assert (await store.credit_account(p)).balance(NOW) == before[p] - spent[p]
    charged, rows = await charges_and_rows(engine)
    assert charged == {a.usage_key: 1 for a in ops} and rows == 3


async def test_a_charge_that_waited_for_its_projects_lock_reads_the_lots_the_holder_left(
    engine: AsyncEngine,
) -> None:
    """Two charges of one project at once: the second waits for the first's lock and then
    draws on the lots as the first left them (its first lot emptied), never on what it read
    before the wait."""
    store = Store(engine)
    pid = await project(store)
    async with engine.begin() as db:  # its lots so far, spent
        await db.execute(update(credit_lots).values(remaining=0))
    first_lot = CreditLot.new(f"{pid}-first", LotKind.PURCHASE, 5, NOW + timedelta(seconds=1))
    later = CreditLot.new(f"{pid}-later", LotKind.PURCHASE, 1_000, NOW + timedelta(seconds=2))
    for lot in (first_lot, later):  # the first holds exactly one charge
        await store.add_lot(pid, lot)
    at = NOW + timedelta(seconds=3)

    async def charge(
        key: str, holding: asyncio.Event | None, release: asyncio.Event | None
    ) -> Draws:
        async with engine.begin() as db:
            plan = await charges.plan_charges(db, pid, [(0, Charge(pid, key, "op", 5, at))])
            await charges.write_plan(db, plan)
            if holding is not None and release is not None:
                holding.set()
                await release.wait()  # the lock held, the lots written, not committed
            return [(d["lot_id"], d["credits"]) for d in plan.draws]

    holding, release = asyncio.Event(), asyncio.Event()
    first = asyncio.create_task(charge("first", holding, release))
    await holding.wait()
    second = asyncio.create_task(charge("second", None, None))
    await asyncio.sleep(0.2)  # the second is waiting for the lock (or the connection)
    assert not second.done()
    release.set()
    assert await first == [(first_lot.lot_id, 5)]
    assert await second == [(later.lot_id, 5)]
    async with engine.connect() as db:
        left = dict((await db.execute(select(credit_lots.c.lot_id, credit_lots.c.remaining))).all())
    assert left[first_lot.lot_id] == 0 and left[later.lot_id] == 995


async def _two_lots(store: Store, pid: str) -> tuple[CreditLot, CreditLot]:
    """The project's lots so far spent; a first lot that holds one charge of 5, a later one."""
    async with store.engine.begin() as db:
        await db.execute(update(credit_lots).values(remaining=0))
    first_lot = CreditLot.new(f"{pid}-first", LotKind.PURCHASE, 5, NOW + timedelta(seconds=1))
    later = CreditLot.new(f"{pid}-later", LotKind.PURCHASE, 1_000, NOW + timedelta(seconds=2))
    for lot in (first_lot, later):
        await store.add_lot(pid, lot)
    return first_lot, later


async def _lots_left(engine: AsyncEngine) -> dict[str, int]:
    async with engine.connect() as db:
        rows = (await db.execute(select(credit_lots.c.lot_id, credit_lots.c.remaining))).all()
    return {str(lot_id): int(left) for lot_id, left in rows}


async def _read_and_plan(engine: AsyncEngine, pid: str, key: str, credits: int) -> ChargePlan:
    """A charge of `credits` planned from the project read without its lock."""
    at = NOW + timedelta(seconds=3)
    async with engine.connect() as db:
        await db.execution_options(isolation_level="AUTOCOMMIT")
        locked, account = await charges.read_unlocked(db, pid, at, at)
    return charges.decide(pid, [(0, Charge(pid, key, "op", credits, at))], {}, locked, account)


async def _write_unlocked(engine: AsyncEngine, plan: ChargePlan) -> bool:
    async with engine.connect() as db:
        await db.execution_options(isolation_level="AUTOCOMMIT")
        return await write_at_once(db, [plan], [])


@pytest.mark.parametrize("engine", ["postgresql"], indirect=True)  # SQLite has no such read
async def test_a_plan_read_without_the_lock_is_not_written_once_its_lot_was_drawn_down(
    engine: AsyncEngine,
) -> None:
    """A charge planned without the lock (PostgreSQL) to draw the first lot whole; then a
    charge that holds the project's lock and, once the planned charge's statement waits for
    it, draws that lot: the statement never locked the lot before the project (the two would
    deadlock), reads the lot as the holder left it, and writes nothing."""
    store = Store(engine)
    pid = await project(store)
    first_lot, later = await _two_lots(store, pid)
    at = NOW + timedelta(seconds=3)
    plan = await _read_and_plan(engine, pid, "unlocked", 5)
    assert [(d["lot_id"], d["credits"]) for d in plan.draws] == [(first_lot.lot_id, 5)]
    holding, release = asyncio.Event(), asyncio.Event()

    async def holder() -> None:
        async with engine.begin() as db:
            held = await charges.plan_charges(db, pid, [(0, Charge(pid, "held", "op", 5, at))])
            holding.set()
            await release.wait()
            await charges.write_plan(db, held)

    held = asyncio.create_task(holder())
    await holding.wait()
    write = asyncio.create_task(_write_unlocked(engine, plan))
    await asyncio.sleep(0.2)
    assert not write.done()  # waiting for the holder's lock
    release.set()
    await held  # the lot was free to draw: no deadlock
    assert await write is False
    charged, _ = await charges_and_rows(engine)
    assert charged == {"held": 1}  # the unlocked plan wrote nothing
    left = await _lots_left(engine)
    assert left[first_lot.lot_id] == 0 and left[later.lot_id] == 1_000


@pytest.mark.parametrize("engine", ["postgresql"], indirect=True)
async def test_a_plan_read_without_the_lock_is_written_when_its_lot_still_holds_its_draw(
    engine: AsyncEngine,
) -> None:
    """Two charges of 2 planned without the lock from the same read of a lot of 5: both
    are written, and the lot keeps 1 (as if one had come after the other)."""
    store = Store(engine)
    pid = await project(store)
    first_lot, _ = await _two_lots(store, pid)
    plans = [await _read_and_plan(engine, pid, key, 2) for key in ("one", "two")]
    assert await _write_unlocked(engine, plans[0]) is True
    assert await _write_unlocked(engine, plans[1]) is True
    assert (await _lots_left(engine))[first_lot.lot_id] == 1
    plan = await _read_and_plan(engine, pid, "three", 2)  # reads 1 left: 1 from the later lot
    stale = replace(plans[0], events=plan.events, draws=[{**plan.draws[0], "credits": 2}])
    stale.lot_deltas = {first_lot.lot_id: 2}
    assert await _write_unlocked(engine, stale) is False  # the lot holds 1, not 2
    charged, _ = await charges_and_rows(engine)
    assert charged == {"one": 1, "two": 1}


async def test_an_op_whose_lot_was_drawn_down_after_its_read_is_written_under_the_lock(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between the read without the lock and the write, another unit draws the lot the op
    meant to draw: the op is then written under the lock, from the lots as they are now (the
    later lot), never drawing the first one twice."""
    store = Store(engine)
    pid = await project(store)
    first_lot, later = await _two_lots(store, pid)
    at = NOW + timedelta(seconds=3)
    read = charges.read_unlocked
    reads: list[int] = []

    async def read_then_another_charge(*args: Any) -> Any:
        seen = await read(*args)
        if not reads and engine.dialect.name == "postgresql":
            await store.ledger.record_many([Charge(pid, "between", "op", 5, at)])
        reads.append(1)
        return seen

    monkeypatch.setattr(charges, "read_unlocked", read_then_another_charge)
    op = replace(accepted_op(pid, 7), at=at)
    [record] = await store.ledger.record_accepted_ops([op])
    assert record.credits > 0 and not record.duplicate
    charged, rows = await charges_and_rows(engine)
    left = await _lots_left(engine)
    if engine.dialect.name == "postgresql":
        assert charged == {"between": 1, op.usage_key: 1} and rows == 1
        assert left[first_lot.lot_id] == 0  # drawn once, by the charge in between
        assert left[later.lot_id] == 1_000 - record.credits
    else:  # SQLite reads under its writer lock: nothing can come in between
        assert charged == {op.usage_key: 1} and rows == 1


def _statements(engine: AsyncEngine) -> tuple[list[str], Any]:
    sent: list[str] = []

    def count(conn: object, cursor: object, statement: str, *args: object) -> None:
        sent.append(statement.split()[0].upper())

    return sent, count


def by_driver(
    monkeypatch: pytest.MonkeyPatch, sent: list[str], own_transaction: list[bool] | None = None
) -> None:
    """Count the statements run by the driver itself (`storage.driver`) with SQLAlchemy's."""
    fetch_on = driver.fetch_on

    async def counted(connection: AsyncConnection, statement: Any, params: Any) -> Any:
        sent.append(statement.sql.split()[0].upper())
        if own_transaction is not None:
            raw = (await connection.get_raw_connection()).driver_connection
            own_transaction.append(not raw.is_in_transaction())
        return await fetch_on(connection, statement, params)

    monkeypatch.setattr(driver, "fetch_on", counted)


@pytest.mark.parametrize("engine", ["postgresql"], indirect=True)
async def test_the_next_group_within_a_moment_is_planned_from_the_lots_its_process_saw(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group right after another of the same project (PostgreSQL) spares the read of the
    lots: it plans from the lots as the first left them, in one statement; once the moment
    is over, it reads them again."""
    store = Store(engine)
    pid = await project(store)
    before = (await store.credit_account(pid)).balance(NOW)
    ledger = store.ledger
    sent, count = _statements(engine)
    event.listen(engine.sync_engine, "before_cursor_execute", count)
    by_driver(monkeypatch, sent)
    try:
        first = await ledger.record_accepted_ops([accepted_op(pid, 1)])
        second = await ledger.record_accepted_ops([accepted_op(pid, 2), accepted_op(pid, 3)])
        ledger._lots_seen.ttl_s = 0.0  # the moment is over
        third = await ledger.record_accepted_ops([accepted_op(pid, 4)])
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", count)
    assert sent == ["SELECT", "WITH", "WITH", "SELECT", "WITH"]
    spent = sum(r.credits for r in [*first, *second, *third])
    assert (await store.credit_account(pid)).balance(NOW) == before - spent
    assert all(r.overage == 0 for r in [*first, *second, *third])


@pytest.mark.parametrize("engine", ["postgresql"], indirect=True)
async def test_a_lot_drawn_down_since_it_was_seen_is_not_overdrawn(engine: AsyncEngine) -> None:
    """The first lot seen with room for an op, then emptied by another charge: the op's
    plan from what was seen fails its statement and is written under the lock, from the
    later lot; the first is never taken under zero."""
    store = Store(engine)
    pid = await project(store)
    first_lot, later = await _two_lots(store, pid)
    at = NOW + timedelta(seconds=3)
    ledger = store.ledger
    small = replace(accepted_op(pid, 1), at=at)
    small = replace(small, relay=replace(small.relay, credits=2))
    await ledger.record_accepted_ops([small])  # seen: the first lot holds 3
    await ledger.record_many([Charge(pid, "between", "op", 3, at)])  # empties it
    op = replace(accepted_op(pid, 2), at=at)
    op = replace(op, relay=replace(op.relay, credits=3))
    [record] = await ledger.record_accepted_ops([op])
    assert record.overage == 0
    left = await _lots_left(engine)
    assert left[first_lot.lot_id] == 0 and left[later.lot_id] == 1_000 - 3


@pytest.mark.parametrize("engine", ["postgresql"], indirect=True)
async def test_credits_granted_since_the_lots_were_seen_are_drawn_before_any_overage(
    engine: AsyncEngine,
) -> None:
    """A project whose lots were seen spent gets a lot: the next op, which the lots seen
    would charge as overage, is planned from a fresh read and draws on the new lot."""
    store = Store(engine)
    pid = await project(store)
    async with engine.begin() as db:
        await db.execute(update(credit_lots).values(remaining=0))
    ledger = store.ledger
    [spent] = await ledger.record_accepted_ops([accepted_op(pid, 1)])
    assert spent.overage == spent.credits  # seen: no credits left
    lot = CreditLot.new(f"{pid}-bought", LotKind.PURCHASE, 10_000, NOW - timedelta(seconds=1))
    await store.add_lot(pid, lot)
    [record] = await ledger.record_accepted_ops([accepted_op(pid, 2)])
    assert record.overage == 0
    assert (await _lots_left(engine))[lot.lot_id] == 10_000 - record.credits


async def test_groups_written_side_by_side_charge_each_op_once_and_overdraw_no_lot(
    engine: AsyncEngine,
) -> None:
    """Ops arriving one after another while groups are written (side by side on
    PostgreSQL), over lots smaller than a few ops: each op charged once, every draw from a
    lot that held it, the balance down by exactly what was charged."""
    store = Store(engine)
    pid = await project(store)
    async with engine.begin() as db:
        await db.execute(update(credit_lots).values(remaining=0))
    for n in range(8):
        lot = CreditLot.new(f"{pid}-{n}", LotKind.PURCHASE, 1_000, NOW - timedelta(seconds=9 - n))
        await store.add_lot(pid, lot)
    ledger = store.ledger

    async def arriving(n: int) -> Any:
        await asyncio.sleep(0.002 * n)
        return await ledger.record_accepted_op(accepted_op(pid, n))

    records = await asyncio.gather(*(arriving(n) for n in range(40)))
    charged, rows = await charges_and_rows(engine)
    assert charged == {accepted_op(pid, n).usage_key: 1 for n in range(40)} and rows == 40
    left = await _lots_left(engine)
    assert all(v >= 0 for v in left.values())
    drawn = 8 * 1_000 - sum(left[f"{pid}-{n}"] for n in range(8))
    assert drawn == sum(r.credits - r.overage for r in records)
    assert sum(r.overage for r in records) == max(0, sum(r.credits for r in records) - 8_000)
