"""An API replica on a chain whose bundling is "intake" (real devnet): an op sent to
/rpc/{chainId} is validated here, then written to the durable intake with its relay charge in
one transaction, and nothing is bundled by the API itself; a refused op is written nowhere;
the status and the by-hash answer come from the intake row until the chain has the op."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from entryway.bundler import receipts as receipts_module
from entryway.bundler.intake import IntakeBundler, IntakeStateView
from entryway.bundler.rpc_types import user_operation_json
from entryway.bundler.standalone import StandaloneSettings, build_bundler
from entryway.bundler.states import OpStatus
from entryway.bundler.validation.outcome_json import outcome_from_json
from entryway.chain.rpc import EthClient, JsonValue
from entryway.devnet.devnet import Devnet
from entryway.domain.plans import PlanName
from entryway.domain.userop import UserOperation
from entryway.service.app import create_app
from entryway.service.services import ChainRuntime, Services
from entryway.storage.engine import make_engine, migrate, sqlite_url
from entryway.storage.intake import OpIntakeStore
from entryway.storage.schema import op_intake, usage_events
from entryway.storage.store import Store
from tests.integration.bundler.test_service_chain_routes import CHAIN, rpc, tenant
from tests.integration.harness import ETHER, Harness

Client = tuple[httpx.AsyncClient, Services, IntakeBundler]


@pytest.fixture
async def intake_service(tmp_path: Path, devnet: Devnet, eth: EthClient) -> AsyncIterator[Client]:
    engine = make_engine(sqlite_url(tmp_path))
    await migrate(engine)
    services = Services()
    services.attach(Store(engine, auth_cache_seconds=0))
    deployment = devnet.chains[0].deployment
    intake = OpIntakeStore(engine)
    bundler_rpc = await build_bundler(
        eth,
        StandaloneSettings(
            rpc_url=devnet.chains[0].rpc_url,
            entry_point=deployment.entry_point,
            executor_keys=(),  # the API holds no executor key
        ),
        make=lambda *parts: IntakeBundler(*parts, intake=intake),
    )
    assert isinstance(bundler_rpc.bundler, IntakeBundler)
    services.chains[CHAIN] = ChainRuntime(CHAIN, "", deployment, bundler_rpc, eth)
    transport = httpx.ASGITransport(app=create_app(services), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://svc.test") as client:
        yield client, services, bundler_rpc.bundler
    await engine.dispose()


async def send_funded_op(
    client: httpx.AsyncClient, services: Services, harness: Harness
) -> tuple[dict[str, str], UserOperation, str]:
    """A new tenant's headers, and a funded op it sent to the API with its hash."""
    _, key = await tenant(services, PlanName.FREE, [CHAIN])
    auth = {"Authorization": f"Bearer {key}"}
    payer = harness.new_key()
    op = await harness.build_op(payer.address, b"")
    await harness.fund(op.sender, ETHER)
    op = harness.sign(op, payer)
    send = rpc("eth_sendUserOperation", user_operation_json(op), harness.deployment.entry_point)
    op_hash = (await client.post(f"/rpc/{CHAIN}", headers=auth, json=send)).json()["result"]
    return auth, op, op_hash


async def test_an_accepted_op_goes_to_the_intake_with_its_charge(
    intake_service: Client, harness: Harness
) -> None:
    client, services, bundler = intake_service
    pid, key = await tenant(services, PlanName.FREE, [CHAIN])
    auth = {"Authorization": f"Bearer {key}"}
    ep = harness.deployment.entry_point
    payer = harness.new_key()
    op = await harness.build_op(payer.address, b"")
    await harness.fund(op.sender, ETHER)
    op = harness.sign(op, payer)

    send = rpc("eth_sendUserOperation", user_operation_json(op), ep)
    r = await client.post(f"/rpc/{CHAIN}", headers=auth, json=send)
    op_hash = r.json()["result"]
    again = await client.post(f"/rpc/{CHAIN}", headers=auth, json=send)  # a client's retry
    assert again.json()["result"] == op_hash

    row = await OpIntakeStore(services.store.engine).get(CHAIN, op_hash)
    assert row is not None
    assert (row.status, row.project_id, row.op) == (OpStatus.PENDING, pid, op)
    # With the API's validation, for the leader to admit it without simulating it again.
    assert row.validation is not None and row.validated_block is not None
    outcome = outcome_from_json(row.validation)
    assert outcome.pre_op_gas > 0 and outcome.code_hashes
    assert row.validated_block <= int(await harness.eth.rpc.request("eth_blockNumber", []), 16)
    engine = services.store.engine
    async with engine.connect() as db:
        assert await db.scalar(select(func.count()).select_from(usage_events)) == 1
    assert len(bundler.mempool) == 0  # the leader bundles it, not the API

    status = await client.post(
        f"/rpc/{CHAIN}", headers=auth, json=rpc("entryway_getUserOperationStatus", op_hash)
    )
    # The caller's own op says where it came from (docs/paymaster.md).
    assert status.json()["result"] == {"status": "pending", "submittedBy": "entryway"}
    by_hash = await client.post(
        f"/rpc/{CHAIN}", headers=auth, json=rpc("eth_getUserOperationByHash", op_hash)
    )
    assert by_hash.json()["result"]["userOperation"] == user_operation_json(op)
    receipt = await client.post(
        f"/rpc/{CHAIN}", headers=auth, json=rpc("eth_getUserOperationReceipt", op_hash)
    )
    assert receipt.json()["result"] is None

    await OpIntakeStore(engine).mark(CHAIN, op_hash, OpStatus.DROPPED, reason="nonce already used")
    status = await client.post(
        f"/rpc/{CHAIN}", headers=auth, json=rpc("entryway_getUserOperationStatus", op_hash)
    )
    assert status.json()["result"] == {
        "status": "dropped",
        "reason": "nonce already used",
        "submittedBy": "entryway",
    }


async def test_an_op_failing_validation_is_written_nowhere(
    intake_service: Client, harness: Harness
) -> None:
    client, services, _ = intake_service
    _, key = await tenant(services, PlanName.FREE, [CHAIN])
    payer = harness.new_key()
    op = await harness.build_op(payer.address, b"")  # not funded: its prefund fails
    op = harness.sign(op, payer)
    send = rpc("eth_sendUserOperation", user_operation_json(op), harness.deployment.entry_point)
    r = await client.post(f"/rpc/{CHAIN}", headers={"Authorization": f"Bearer {key}"}, json=send)
    assert "error" in r.json(), r.text
    async with services.store.engine.connect() as db:
        assert await db.scalar(select(func.count()).select_from(op_intake)) == 0
        assert await db.scalar(select(func.count()).select_from(usage_events)) == 0


async def test_an_op_mined_then_reorged_away_is_reported_dropped(
    intake_service: Client, harness: Harness
) -> None:
    """The leader marked the op mined and stopped following it; the chain has no receipt for
    it (its block left the chain): the status says dropped and why, not mined forever."""
    client, services, _ = intake_service
    auth, _op, op_hash = await send_funded_op(client, services, harness)
    intake = OpIntakeStore(services.store.engine)
    status = rpc("entryway_getUserOperationStatus", op_hash)

    assert await intake.mark(CHAIN, op_hash, OpStatus.INCLUDED, tx_hash="0x" + "ee" * 32)
    answer = await client.post(f"/rpc/{CHAIN}", headers=auth, json=status)
    assert answer.json()["result"] == {
        "status": "dropped",
        "reason": "its block left the chain",
        "submittedBy": "entryway",
    }


async def test_receipt_polls_of_an_open_op_are_answered_from_the_intake(
    intake_service: Client, harness: Harness, eth: EthClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Clients poll receipts hard: while the op's row is open the replica answers from it and
    asks the node nothing; once the leader wrote an outcome, the node is asked again. And a
    leader in the same process is woken by each write."""
    client, services, bundler = intake_service
    woken: list[bool] = []
    bundler.on_written = lambda: woken.append(True)
    auth, _op, op_hash = await send_funded_op(client, services, harness)
    assert woken == [True]

    asked: list[str] = []
    request = eth.rpc.request

    async def counted(method: str, params: Sequence[JsonValue] = ()) -> JsonValue:
        asked.append(method)
        return await request(method, params)

    monkeypatch.setattr(eth.rpc, "request", counted)
    poll = rpc("eth_getUserOperationReceipt", op_hash)
    for _ in range(3):
        answer = await client.post(f"/rpc/{CHAIN}", headers=auth, json=poll)
        assert answer.json()["result"] is None
    status = rpc("entryway_getUserOperationStatus", op_hash)
    answer = await client.post(f"/rpc/{CHAIN}", headers=auth, json=status)
    assert answer.json()["result"]["status"] == "pending"
    # The polls asked the node nothing. The head may be read meanwhile: by the block clock,
    # and, for a few seconds after the send, in the background to keep it fresh
    # (`bundler.head`, eth_getBlockByNumber).
    head_reads = {"eth_blockNumber", "eth_getBlockByNumber"}
    assert [m for m in asked if m not in head_reads] == []

    intake = OpIntakeStore(services.store.engine)
    await intake.mark(CHAIN, op_hash, OpStatus.DROPPED, reason="test: no longer open")
    answer = await client.post(f"/rpc/{CHAIN}", headers=auth, json=poll)
    assert answer.json()["result"] is None
    assert "eth_getLogs" in asked


async def test_a_receipt_is_read_off_the_bundle_the_leader_said_it_sent(
    intake_service: Client, harness: Harness, eth: EthClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the leader wrote that it sent the op's bundle, the replica reads that bundle's
    receipt: the client gets the op's receipt as soon as the block is there, before the leader
    writes back that it was mined. Polls of a bundle not mined yet share one node read within
    BUNDLE_READ_REUSE_S, and look for no log."""
    client, services, _ = intake_service
    auth, op, op_hash = await send_funded_op(client, services, harness)
    intake = OpIntakeStore(services.store.engine)
    poll = rpc("eth_getUserOperationReceipt", op_hash)
    status = rpc("entryway_getUserOperationStatus", op_hash)

    asked: list[str] = []
    batch = eth.rpc.batch

    async def counted(calls: Sequence[tuple[str, Sequence[JsonValue]]]) -> list[JsonValue]:
        asked.extend(method for method, _ in calls)
        return await batch(calls)

    monkeypatch.setattr(eth.rpc, "batch", counted)
    monkeypatch.setattr(receipts_module, "BUNDLE_READ_REUSE_S", 60.0)
    unmined_bundle = "0x" + "ab" * 32  # sent, not mined (no such transaction yet)
    assert await intake.mark(CHAIN, op_hash, OpStatus.SUBMITTED, tx_hash=unmined_bundle)
    for _ in range(3):
        answer = await client.post(f"/rpc/{CHAIN}", headers=auth, json=poll)
        assert answer.json()["result"] is None
    answer = await client.post(f"/rpc/{CHAIN}", headers=auth, json=status)
    assert answer.json()["result"]["status"] == "submitted"
    assert asked.count("eth_getTransactionReceipt") == 1
    assert "eth_getLogs" not in asked

    bundle = await harness.handle_ops([op])  # mined; the row still says submitted
    tx_hash = bundle.receipt.tx_hash
    assert await intake.mark(CHAIN, op_hash, OpStatus.SUBMITTED, tx_hash=tx_hash)
    answer = (await client.post(f"/rpc/{CHAIN}", headers=auth, json=poll)).json()["result"]
    assert answer is not None
    assert (answer["userOpHash"], answer["success"]) == (op_hash, True)
    assert answer["receipt"]["transactionHash"] == tx_hash
    answer = await client.post(f"/rpc/{CHAIN}", headers=auth, json=status)
    assert answer.json()["result"]["status"] == "included"
    by_hash = rpc("eth_getUserOperationByHash", op_hash)
    answer = (await client.post(f"/rpc/{CHAIN}", headers=auth, json=by_hash)).json()["result"]
    assert (answer["transactionHash"], answer["userOperation"]) == (
        tx_hash,
        user_operation_json(op),
    )
    assert "eth_getLogs" not in asked


async def test_a_poll_reads_the_ops_intake_state_once(
    intake_service: Client, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A receipt poll asks whether the op is open, then for the receipt of the bundle its row
    names; a status poll asks the same: each reads the op's intake state once."""
    client, services, bundler = intake_service
    auth, _op, op_hash = await send_funded_op(client, services, harness)
    read: list[str] = []
    state = bundler.intake.state

    async def counted(chain_id: int, user_op_hash: str) -> IntakeStateView | None:
        read.append(user_op_hash)
        return await state(chain_id, user_op_hash)

    monkeypatch.setattr(bundler.intake, "state", counted)
    monkeypatch.setattr(receipts_module, "BUNDLE_READ_REUSE_S", 0.0)  # each poll reads it
    unmined_bundle = "0x" + "cd" * 32  # sent, not mined
    intake = OpIntakeStore(services.store.engine)
    assert await intake.mark(CHAIN, op_hash, OpStatus.SUBMITTED, tx_hash=unmined_bundle)
    for method in ("eth_getUserOperationReceipt", "entryway_getUserOperationStatus"):
        read.clear()
        answer = await client.post(f"/rpc/{CHAIN}", headers=auth, json=rpc(method, op_hash))
        assert "error" not in answer.json(), answer.json()
        assert read == [op_hash], method
