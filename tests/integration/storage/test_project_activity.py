"""The dashboard's reads of a project's activity (SQLite and PostgreSQL): the UserOperations
it sent, newest first, from their relay charges, and nothing of another project's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.credits import CreditLot, LotKind
from entryway.domain.notarization import NewNotarization, NotarizationMode
from entryway.domain.plans import PlanName
from entryway.domain.pricebook import default_price_book
from entryway.domain.userop import UserOperation
from entryway.paymaster.relay_accounting import RelayAccounting
from entryway.storage.notary import NotaryStore
from entryway.storage.project_activity import ProjectActivity
from entryway.storage.store import Store

NOW = datetime(2026, 11, 21, 12, tzinfo=UTC)
CHAIN = 80002


def user_op(sender_byte: str) -> UserOperation:
    return UserOperation(
        sender="0x" + sender_byte * 20, nonce=1, call_data=b"\x01" * 40, call_gas_limit=50_000,
        verification_gas_limit=100_000, pre_verification_gas=50_000,
        max_fee_per_gas=2_000_000_000, max_priority_fee_per_gas=1_000_000_000,
    )  # fmt: skip


async def project(store: Store, email: str) -> str:
    owner = await store.create_user(email, NOW)
    pid = await store.create_project(owner, "p", PlanName.STARTER, [CHAIN], NOW)
    await store.add_lot(pid, CreditLot.new(f"{pid}-lot", LotKind.PURCHASE, 1_000_000, NOW))
    return pid


async def send(store: Store, pid: str, op_hash: str, sender_byte: str, at: datetime) -> None:
    await RelayAccounting(
        store.ledger, default_price_book(), clock=lambda: at
    ).record_accepted_op(
        project_id=pid, chain_id=CHAIN, op=user_op(sender_byte), user_op_hash=op_hash,
        service_paymaster=None, endpoint="rpc:eth_sendUserOperation", key_id=None,
    )  # fmt: skip


async def test_a_projects_ops_newest_first_and_no_other_charge(engine: AsyncEngine) -> None:
    store = Store(engine)
    mine = await project(store, "mine@example.org")
    theirs = await project(store, "theirs@example.org")
    first, second = "0x" + "0a" * 32, "0x" + "0B" * 32
    await send(store, mine, first, "11", NOW)
    await send(store, mine, second, "22", NOW + timedelta(seconds=5))
    await send(store, theirs, "0x" + "0c" * 32, "33", NOW + timedelta(seconds=9))
    await store.record_usage(mine, "notarization:x", "notarization", 5, NOW)

    ops = await ProjectActivity(engine).user_operations(mine)
    assert [o.user_op_hash for o in ops] == [second.lower(), first]
    assert [o.chain_id for o in ops] == [CHAIN, CHAIN]
    assert ops[0].sender is not None and ops[0].sender.lower() == "0x" + "22" * 20
    assert ops[0].sent_at == NOW + timedelta(seconds=5)
    assert [
        o.user_op_hash for o in await ProjectActivity(engine).user_operations(mine, limit=1)
    ] == [second.lower()]
    assert await ProjectActivity(engine).notarization_ids(mine) == []


async def test_a_projects_notarizations_newest_first(engine: AsyncEngine) -> None:
    store = Store(engine)
    mine = await project(store, "mine@example.org")
    theirs = await project(store, "theirs@example.org")
    ids = []
    for n, (pid, at) in enumerate([(mine, NOW), (theirs, NOW), (mine, NOW + timedelta(1))]):
        notaries = NotaryStore(engine, clock=lambda at=at: at)
        item = NewNotarization(document_hash=bytes([n]) * 32, data_bytes=32)
        submitted = await notaries.submit(
            pid, None, CHAIN, NotarizationMode.BATCHED, [item], f"k{n}", digest=f"d{n}"
        )
        ids.append(submitted.notarization_ids[0])
    assert await ProjectActivity(engine).notarization_ids(mine) == [ids[2], ids[0]]
