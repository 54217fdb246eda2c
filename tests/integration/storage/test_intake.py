"""The durable op intake and the bundler leader's lock (SQLite and PostgreSQL): an accepted
op is written with its relay charge in one transaction, read back by the leader until it has
an outcome, and only one process at a time leads a chain's executor key set."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.bundler.intake import IntakeAdmission, admitting
from entryway.bundler.states import OpStatus
from entryway.domain.pricebook import default_price_book
from entryway.paymaster.relay_accounting import RelayAccounting
from entryway.storage.intake import OpIntakeStore
from entryway.storage.leader_lock import LeaderLock, leader_key
from entryway.storage.schema import op_intake, usage_events
from entryway.storage.store import Store
from tests.integration.storage.test_relay_accounting import (
    CHAIN,
    NOW,
    InjectedFaultError,
    project,
    user_op,
)

ENTRY_POINT = "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108"
EXECUTORS = ["0x" + "0b" * 20, "0x" + "0A" * 20]


def hash_of(n: int) -> str:
    return "0x" + f"{n:064x}"


async def accept(store: Store, pid: str, op_hash: str, *, nonce: int = 7) -> None:
    accounting = RelayAccounting(store.ledger, default_price_book(), clock=lambda: NOW)
    op = user_op(sponsored=False)
    await accounting.record_accepted_op(
        project_id=pid,
        chain_id=CHAIN,
        op=type(op)(**{**_fields(op), "nonce": nonce}),
        user_op_hash=op_hash,
        service_paymaster=None,
        endpoint="rpc:eth_sendUserOperation",
        intake_entry_point=ENTRY_POINT,
    )


def _fields(op: object) -> dict[str, object]:
    return {name: getattr(op, name) for name in op.__slots__}  # type: ignore[attr-defined]


async def test_an_accepted_op_is_in_the_intake_with_its_charge(engine: AsyncEngine) -> None:
    store = Store(engine)
    pid = await project(store)
    await accept(store, pid, hash_of(1))
    await accept(store, pid, hash_of(1))  # a client retrying its send: nothing more
    intake = OpIntakeStore(engine)
    [record] = await intake.open_ops(CHAIN)
    assert record.user_op_hash == hash_of(1)
    assert record.status is OpStatus.PENDING
    assert record.project_id == pid
    assert record.op.nonce == 7
    assert record.entry_point == ENTRY_POINT
    async with engine.connect() as db:
        charges = await db.scalar(select(func.count()).select_from(usage_events))
    assert charges == 1


async def test_the_op_and_its_charge_commit_together(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A charge that fails leaves no intake row: no op is bundled unaccounted."""
    from entryway.storage import ledger_charges

    store = Store(engine)
    pid = await project(store)

    def failing(*args: object, **kwargs: object) -> object:
        raise InjectedFaultError("the charge fails")

    monkeypatch.setattr(ledger_charges, "decide", failing)
    with pytest.raises(InjectedFaultError):
        await accept(store, pid, hash_of(2))
    async with engine.connect() as db:
        assert await db.scalar(select(func.count()).select_from(op_intake)) == 0


async def test_the_leader_reads_open_ops_and_writes_their_outcome(engine: AsyncEngine) -> None:
    store = Store(engine)
    pid = await project(store)
    for n in (1, 2, 3):
        await accept(store, pid, hash_of(n), nonce=n)
    intake = OpIntakeStore(engine)
    assert [r.user_op_hash for r in await intake.open_ops(CHAIN)] == [hash_of(n) for n in (1, 2, 3)]
    assert [r.user_op_hash for r in await intake.open_ops(CHAIN, skip=frozenset({hash_of(1)}))] == [
        hash_of(2),
        hash_of(3),
    ]
    # Each EntryPoint's leader reads only the ops sent to its EntryPoint.
    assert len(await intake.open_ops(CHAIN, entry_point=ENTRY_POINT)) == 3
    assert (
        await intake.open_ops(CHAIN, entry_point="0x0000000071727De22E5E9d8BAf0edAc6f37da032") == []
    )
    tx = "0x" + "cd" * 32
    assert await intake.mark(CHAIN, hash_of(1), OpStatus.SUBMITTED, tx_hash=tx)
    assert await intake.mark(CHAIN, hash_of(1), OpStatus.INCLUDED, tx_hash=tx)
    assert await intake.mark(CHAIN, hash_of(2), OpStatus.DROPPED, reason="nonce already used")
    assert not await intake.mark(CHAIN, hash_of(2), OpStatus.PENDING)  # final stays final
    assert [r.user_op_hash for r in await intake.open_ops(CHAIN)] == [hash_of(3)]
    included = await intake.get(CHAIN, hash_of(1))
    dropped = await intake.get(CHAIN, hash_of(2))
    assert included is not None and included.status is OpStatus.INCLUDED
    assert included.tx_hash == tx
    assert dropped is not None and dropped.reason == "nonce already used"
    assert await intake.open_ops(CHAIN + 1) == []
    assert await intake.get(CHAIN + 1, hash_of(1)) is None


def test_the_lock_key_is_the_chain_and_the_set_of_executors() -> None:
    assert leader_key(1, EXECUTORS) == leader_key(1, [a.upper() for a in reversed(EXECUTORS)])
    assert leader_key(1, EXECUTORS) != leader_key(2, EXECUTORS)
    assert leader_key(1, EXECUTORS) != leader_key(1, EXECUTORS[:1])


async def test_one_leader_at_a_time_and_the_standby_takes_over(engine: AsyncEngine) -> None:
    key = leader_key(CHAIN, EXECUTORS)
    leader, standby = LeaderLock(engine, key), LeaderLock(engine, key)
    other_chain = LeaderLock(engine, leader_key(CHAIN + 1, EXECUTORS))
    try:
        # PostgreSQL: the advisory lock; SQLite: the lease row (storage.leader_lock).
        assert await leader.try_acquire()
        assert await leader.still_held()
        assert not await standby.try_acquire()
        assert not await standby.try_acquire()  # polling does not steal it
        assert await other_chain.try_acquire()  # another chain has its own leader
        await leader.release()
        assert not await leader.still_held()
        assert await standby.try_acquire()
        assert not await leader.try_acquire()
    finally:
        for lock in (leader, standby, other_chain):
            await lock.release()


@pytest.mark.parametrize("engine", ["postgresql"], indirect=True)  # the advisory lock is PG's
async def test_the_lock_is_released_when_its_connection_dies(engine: AsyncEngine) -> None:
    """A leader killed outright holds nothing: its session ends with its connection."""
    key = leader_key(CHAIN, EXECUTORS)
    leader, standby = LeaderLock(engine, key), LeaderLock(engine, key)
    try:
        assert await leader.try_acquire()
        assert not await standby.try_acquire()
        assert leader._connection is not None
        raw = await leader._connection.get_raw_connection()
        raw.driver_connection.terminate()  # type: ignore[union-attr]  # the socket closes
        # The server ends the session once it sees the socket closed: soon, not at once (a
        # standby polls anyway).
        for _ in range(100):
            if await standby.try_acquire():
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the lock outlived its connection by 5 s")
        assert not await leader.still_held()
    finally:
        await leader.release()
        await standby.release()


async def test_polled_states_read_together_answer_each_poll(engine: AsyncEngine) -> None:
    """Receipt and status polls of many ops at once share reads; each gets its own op's
    state, and an op the intake does not have reads as None."""
    store = Store(engine)
    pid = await project(store)
    for n in range(1, 4):
        await accept(store, pid, hash_of(n), nonce=n)
    intake = OpIntakeStore(engine)
    await intake.mark(CHAIN, hash_of(2), OpStatus.SUBMITTED, tx_hash="0x" + "ab" * 32)
    asked = [hash_of(n) for n in (1, 2, 3, 9, 2, 1)] * 20
    # Asked in upper case, as a client may write a hash; the state names it in lower case.
    states = await asyncio.gather(*(intake.state(CHAIN, "0x" + h[2:].upper()) for h in asked))
    for op_hash, state in zip(asked, states, strict=True):
        if op_hash == hash_of(9):
            assert state is None
            continue
        assert state is not None and state.user_op_hash == op_hash
        submitted = op_hash == hash_of(2)
        assert state.status is (OpStatus.SUBMITTED if submitted else OpStatus.PENDING)
        assert state.tx_hash == ("0x" + "ab" * 32 if submitted else None)
    assert await intake.state(CHAIN + 1, hash_of(1)) is None  # another chain's op


async def test_a_dropped_op_sent_again_is_open_again_and_not_charged_again(
    engine: AsyncEngine,
) -> None:
    store = Store(engine)
    pid = await project(store)
    intake = OpIntakeStore(engine)
    await accept(store, pid, hash_of(4))
    await intake.mark(CHAIN, hash_of(4), OpStatus.DROPPED, reason="expires at 1")
    await accept(store, pid, hash_of(4))
    row = await intake.get(CHAIN, hash_of(4))
    assert row is not None and (row.status, row.reason) == (OpStatus.PENDING, None)
    await intake.mark(CHAIN, hash_of(4), OpStatus.INCLUDED, tx_hash="0x" + "ee" * 32)
    await accept(store, pid, hash_of(4))  # an included op stays included
    row = await intake.get(CHAIN, hash_of(4))
    assert row is not None and row.status is OpStatus.INCLUDED
    async with engine.connect() as db:
        assert await db.scalar(select(func.count()).select_from(usage_events)) == 1


async def test_the_admitting_replicas_validation_is_written_with_the_op(
    engine: AsyncEngine,
) -> None:
    """An intake bundler's validation travels with the op (for the leader to admit it without
    simulating it again); the op sent again after a drop carries its new validation."""
    store = Store(engine)
    pid = await project(store)
    intake = OpIntakeStore(engine)
    op = user_op(sponsored=False)
    for validation, block in (('{"v":1}', 10), ('{"v":2}', 2**40)):
        token = admitting.set(IntakeAdmission(ENTRY_POINT, op, validation, block))
        try:
            await accept(store, pid, hash_of(5))
        finally:
            admitting.reset(token)
        row = await intake.get(CHAIN, hash_of(5))
        assert row is not None and (row.validation, row.validated_block) == (validation, block)
        await intake.mark(CHAIN, hash_of(5), OpStatus.DROPPED, reason="expires at 1")
    await intake.add(chain_id=CHAIN, user_op_hash=hash_of(6), entry_point=ENTRY_POINT, op=op)
    [unvalidated] = await intake.open_ops(CHAIN)
    assert (unvalidated.validation, unvalidated.validated_block) == (None, None)
