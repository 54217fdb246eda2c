"""An accepted op's accounting is one unit of work (SQLite and PostgreSQL): the relay charge,
the sponsorship hold's link to the op and the settlement task commit together or not at all,
and recording the same op again charges nothing more."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.credits import CreditLot, LotKind
from entryway.domain.plans import PlanName
from entryway.domain.pricebook import default_price_book
from entryway.domain.userop import UserOperation
from entryway.paymaster.costs import estimated_quote, sponsorship_key
from entryway.paymaster.relay_accounting import RelayAccounting, op_usage_key
from entryway.paymaster.settlement import SETTLE_TASK
from entryway.paymaster.signer import ValidityWindow, stub_paymaster_data
from entryway.storage import ledger_postings
from entryway.storage.store import Store
from entryway.storage.tasks import TaskQueue

NOW = datetime(2026, 11, 21, 12, tzinfo=UTC)
CHAIN = 80002
PAYMASTER = "0x" + "aa" * 20
OP_HASH = "0x" + "ab" * 32


class InjectedFaultError(RuntimeError):
    pass


def user_op(*, sponsored: bool) -> UserOperation:
    op = UserOperation(
        sender="0x" + "12" * 20, nonce=7, call_data=b"\x01" * 40, call_gas_limit=50_000,
        verification_gas_limit=100_000, pre_verification_gas=50_000,
        max_fee_per_gas=2_000_000_000, max_priority_fee_per_gas=1_000_000_000,
    )  # fmt: skip
    if not sponsored:
        return op
    window = ValidityWindow(valid_until=int(NOW.timestamp()) + 600, valid_after=0)
    return op.with_paymaster(PAYMASTER, 60_000, 40_000, stub_paymaster_data(window))


async def project(store: Store) -> str:
    owner = await store.create_user(f"{id(store)}-{asyncio.get_running_loop().time()}@x.org", NOW)
    pid = await store.create_project(owner, "p", PlanName.STARTER, [CHAIN], NOW)
    await store.add_lot(pid, CreditLot.new(f"{pid}-lot", LotKind.PURCHASE, 1_000_000, NOW))
    return pid


def accounting(store: Store) -> RelayAccounting:
    return RelayAccounting(store.ledger, default_price_book(), clock=lambda: NOW)


async def record(store: Store, pid: str, op: UserOperation) -> bool:
    done = await accounting(store).record_accepted_op(
        project_id=pid, chain_id=CHAIN, op=op, user_op_hash=OP_HASH,
        service_paymaster=PAYMASTER, endpoint="rpc:eth_sendUserOperation", key_id=None,
    )  # fmt: skip
    return not done.duplicate


async def balance(store: Store, pid: str) -> int:
    return (await store.credit_account(pid)).balance(NOW)


async def settle_tasks(engine: AsyncEngine, pid: str) -> list[str]:
    return [t.kind for t in await TaskQueue(engine).list(pid) if t.kind == SETTLE_TASK]


@pytest.mark.parametrize("faulty", ["enqueue_in", "link"])
async def test_a_fault_in_any_step_records_nothing_then_a_retry_records_it_once(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch, faulty: str
) -> None:
    store = Store(engine)
    pid = await project(store)
    op = user_op(sponsored=True)
    hold = estimated_quote(default_price_book(), CHAIN, op)
    await store.ledger.hold(
        pid, sponsorship_key(CHAIN, op), hold, NOW,
        key_id=None, endpoint="pm", chain_id=CHAIN, subject=op.sender, policy_id=None,
    )  # fmt: skip
    held = await balance(store, pid)

    async def fault(*args: object, **kwargs: object) -> None:
        raise InjectedFaultError(faulty)

    target: object = TaskQueue if faulty == "enqueue_in" else ledger_postings
    with monkeypatch.context() as patched:
        patched.setattr(target, faulty, fault)
        with pytest.raises(InjectedFaultError):
            await record(store, pid, op)
    # Nothing charged, nothing linked, no task.
    assert not await store.ledger.owns(pid, op_usage_key(CHAIN, OP_HASH))
    assert await store.ledger.credits_for(pid, OP_HASH) == (0, True)
    assert await settle_tasks(engine, pid) == []
    assert await balance(store, pid) == held

    assert await record(store, pid, op)
    assert not await record(store, pid, op)  # a retried send
    assert await store.ledger.owns(pid, op_usage_key(CHAIN, OP_HASH))
    assert await store.ledger.credits_for(pid, OP_HASH) == (hold.credits, False)
    assert await settle_tasks(engine, pid) == [SETTLE_TASK]
    (task,) = await TaskQueue(engine).list(pid)
    assert task.payload["userOpHash"] == OP_HASH and task.run_at > NOW
    assert await balance(store, pid) == held  # relaying a sponsored op is free


async def test_an_op_paying_its_own_gas_is_charged_its_relay_once(engine: AsyncEngine) -> None:
    store = Store(engine)
    pid = await project(store)
    before = await balance(store, pid)
    op = user_op(sponsored=False)
    relay = default_price_book().relayed_user_operation(
        calls=1, calldata_bytes=len(op.call_data), sponsored=False
    )
    assert relay.credits > 0
    assert await record(store, pid, op)
    assert not await record(store, pid, op)
    assert await balance(store, pid) == before - relay.credits
    assert await store.ledger.credits_for(pid, OP_HASH) == (relay.credits, True)
    assert await settle_tasks(engine, pid) == []  # nothing to settle
