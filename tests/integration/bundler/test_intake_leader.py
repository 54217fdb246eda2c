"""The bundler leader over the durable intake (real devnet): it bundles what the intake holds
and writes back each op's outcome; on taking over it recognises what a dead leader's bundles
already did (an op mined is marked included, never sent again; an op whose nonce is used is
dropped with that reason); an op that no longer validates is dropped with the reason."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from eth_account.signers.local import LocalAccount

from entryway.bundler.leader import FRESH_BLOCKS, IntakeLeader
from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.standalone import StandaloneSettings, build_bundler
from entryway.bundler.states import BundlingMode, OpStatus, Tracked
from entryway.bundler.takeover import PreviousBundles
from entryway.bundler.validation.outcome import ValidationOutcome
from entryway.bundler.validation.outcome_json import outcome_to_json
from entryway.chain.rpc import EthClient
from entryway.devnet.devnet import Devnet
from entryway.domain.entry_points import V07
from entryway.domain.evm import hex_to_bytes
from entryway.domain.userop import UserOperation, user_op_hash
from entryway.storage.engine import make_engine, migrate, sqlite_url
from entryway.storage.intake import IntakeRecord, OpIntakeStore
from tests.integration.bundler.test_entry_point_v07 import FACTORY07, simple_account_op
from tests.integration.harness import ETHER, Harness

Leading = tuple[IntakeLeader, OpIntakeStore, BundlerRpc]


@pytest.fixture
async def leading(tmp_path: Path, devnet: Devnet, eth: EthClient) -> AsyncIterator[Leading]:
    engine = make_engine(sqlite_url(tmp_path))
    await migrate(engine)
    executor = Harness.new_key()
    await eth.rpc.request("anvil_setBalance", [executor.address, hex(1000 * ETHER)])
    rpc = await build_bundler(
        eth,
        StandaloneSettings(
            rpc_url=devnet.chains[0].rpc_url,
            entry_point=devnet.chains[0].deployment.entry_point,
            executor_keys=(executor,),
            mode=BundlingMode.MANUAL,  # the test says when a bundle goes
        ),
    )
    await rpc.start()
    intake = OpIntakeStore(engine)
    yield IntakeLeader(rpc.bundler, intake), intake, rpc
    await rpc.stop()
    await engine.dispose()


async def signed_op(harness: Harness, *, funded: bool = True) -> UserOperation:
    op, _ = await owned_op(harness, funded=funded)
    return op


async def owned_op(harness: Harness, *, funded: bool = True) -> tuple[UserOperation, LocalAccount]:
    owner = harness.new_key()
    op = await harness.build_op(owner.address, b"")
    if funded:
        await harness.fund(op.sender, ETHER)
    return harness.sign(op, owner), owner


async def into_intake(harness: Harness, intake: OpIntakeStore, op: UserOperation) -> str:
    ep = harness.deployment.entry_point
    op_hash = "0x" + user_op_hash(op, ep, harness.chain_id).hex()
    await intake.add(chain_id=harness.chain_id, user_op_hash=op_hash, entry_point=ep, op=op)
    return op_hash


async def settled(leader: IntakeLeader, intake: OpIntakeStore, op_hash: str) -> IntakeRecord:
    for _ in range(100):
        await leader.step()
        row = await intake.get(leader.chain_id, op_hash)
        assert row is not None
        if row.status in (OpStatus.INCLUDED, OpStatus.FAILED, OpStatus.DROPPED):
            return row
        await asyncio.sleep(0.05)
    raise AssertionError(f"op {op_hash} still {row.status}")


async def test_the_leader_bundles_the_intake_and_writes_back_the_outcome(
    leading: Leading, harness: Harness
) -> None:
    leader, intake, rpc = leading
    op_hash = await into_intake(harness, intake, await signed_op(harness))
    await leader.step()
    assert len(rpc.bundler.mempool) == 1
    tx = await rpc.bundler.bundle_once(wait=True)
    row = await settled(leader, intake, op_hash)
    assert (row.status, row.tx_hash) == (OpStatus.INCLUDED, tx)
    assert await intake.open_ops(harness.chain_id) == []


async def test_a_new_leader_recognises_what_the_dead_one_sent(
    leading: Leading, harness: Harness
) -> None:
    leader, intake, rpc = leading
    mined = await signed_op(harness)
    mined_hash = await into_intake(harness, intake, mined)
    await harness.handle_ops([mined])  # the dead leader's bundle, mined after it died
    sent, owner = await owned_op(harness)
    twin = harness.sign(replace(sent, call_gas_limit=sent.call_gas_limit + 1), owner)
    twin_hash = await into_intake(harness, intake, twin)
    await harness.handle_ops([sent])  # another op of the same nonce got there first

    row = await settled(leader, intake, mined_hash)
    assert row.status is OpStatus.INCLUDED
    assert row.tx_hash is not None
    dropped = await settled(leader, intake, twin_hash)
    assert dropped.status is OpStatus.DROPPED
    assert dropped.reason is not None and dropped.reason.startswith("nonce already used")
    assert len(rpc.bundler.mempool) == 0  # neither sent again


async def test_an_op_that_no_longer_validates_is_dropped_with_the_reason(
    leading: Leading, harness: Harness
) -> None:
    leader, intake, rpc = leading
    op_hash = await into_intake(harness, intake, await signed_op(harness, funded=False))
    row = await settled(leader, intake, op_hash)
    assert row.status is OpStatus.DROPPED
    assert row.reason is not None and row.reason.startswith("refused on revalidation: ")
    assert len(rpc.bundler.mempool) == 0


async def test_an_op_dropped_here_but_mined_by_the_dead_leaders_bundle_is_included(
    leading: Leading, harness: Harness
) -> None:
    """The dead leader's bundle was still pending at takeover and landed first: this leader's
    own copy of the op fails, yet the op is on the chain, and the row says so."""
    leader, intake, rpc = leading
    op = await signed_op(harness)
    op_hash = await into_intake(harness, intake, op)
    await leader.step()
    assert len(rpc.bundler.mempool) == 1
    bundle = await harness.handle_ops([op])  # the dead leader's bundle lands
    rpc.bundler.mempool.clear()
    rpc.bundler.tracked[hex_to_bytes(op_hash)] = Tracked(OpStatus.DROPPED, reason="AA25")
    row = await settled(leader, intake, op_hash)
    assert (row.status, row.reason) == (OpStatus.INCLUDED, None)
    assert row.tx_hash == bundle.receipt.tx_hash


async def pending_bundle(
    harness: Harness, eth: EthClient, executor: LocalAccount, ops: list[UserOperation]
) -> str:
    """handleOps of `ops` sent from `executor` as a leader sends a bundle, not waited for."""
    block = await eth.get_block("latest")
    base_fee = int(block["baseFeePerGas"], 16)
    signed = executor.sign_transaction(
        {
            "type": 2,
            "chainId": harness.chain_id,
            "nonce": await eth.get_nonce(executor.address, "pending"),
            "to": harness.deployment.entry_point,
            "value": 0,
            "data": harness.handle_ops_data(ops),
            "gas": 8_000_000,
            "maxFeePerGas": 2 * base_fee + 10**9,
            "maxPriorityFeePerGas": 10**9,
        }
    )
    return await eth.send_raw_transaction(bytes(signed.raw_transaction))


async def test_ops_in_the_dead_leaders_pending_bundle_end_mined_not_dropped(
    leading: Leading, harness: Harness, eth: EthClient
) -> None:
    """The leader died right after sending a bundle, from the executor keys this leader holds
    too. Validated again while that bundle is pending, its ops (each deploying its account)
    fail (AA10) and would be written off as dropped a block before they are mined: instead
    they wait for the bundle, then are recorded with its transaction."""
    _, intake, rpc = leading
    bundler = rpc.bundler
    ops = [await signed_op(harness) for _ in range(3)]
    hashes = [await validated_into_intake(harness, intake, rpc, op) for op in ops]
    dropped_before = bundler.counts.ops_dropped
    await eth.rpc.request("evm_setAutomine", [False])
    try:
        tx_hash = await pending_bundle(harness, eth, bundler.executors[0].account, ops)
        leader = IntakeLeader(bundler, intake)  # the standby takes over now
        for _ in range(3):
            await leader.step()
            await bundler.bundle_once(wait=False)
        assert len(bundler.mempool) == 0  # none loaded while the bundle is pending
        for op_hash in hashes:
            row = await intake.get(harness.chain_id, op_hash)
            assert row is not None and row.status is OpStatus.PENDING
        await eth.rpc.request("evm_mine", [])
    finally:
        await eth.rpc.request("evm_setAutomine", [True])
    for op_hash in hashes:
        row = await settled(leader, intake, op_hash)
        assert (row.status, row.tx_hash, row.reason) == (OpStatus.INCLUDED, tx_hash, None)
        receipt = await bundler.receipts.receipt(hex_to_bytes(op_hash))
        assert receipt is not None and receipt["receipt"]["transactionHash"] == tx_hash
    assert bundler.counts.ops_dropped == dropped_before
    assert len(bundler.mempool) == 0 and bundler.counts.bundles_sent == 0  # none sent again


async def test_an_op_refused_after_the_wait_gave_up_is_still_recorded_mined_if_it_was(
    leading: Leading, harness: Harness, eth: EthClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The previous leader's bundle stuck past the wait: the op is validated again, and
    refused (its account already deployed in the node's pending state); the bundle is mined
    meanwhile. Before writing the drop the leader reads the chain again: included."""
    _, intake, rpc = leading
    bundler = rpc.bundler
    op = await signed_op(harness)
    op_hash = await into_intake(harness, intake, op)
    real_send = bundler.send

    async def refused_then_mined(op: UserOperation, **how: Any) -> Any:
        try:
            return await real_send(op, **how)
        finally:
            await eth.rpc.request("evm_mine", [])  # the stuck bundle lands meanwhile

    await eth.rpc.request("evm_setAutomine", [False])
    try:
        tx_hash = await pending_bundle(harness, eth, bundler.executors[0].account, [op])
        previous = PreviousBundles(eth, [e.address for e in bundler.executors], wait_s=0.0)
        leader = IntakeLeader(bundler, intake, previous=previous)
        monkeypatch.setattr(bundler, "send", refused_then_mined)
        await leader.step()
    finally:
        await eth.rpc.request("evm_setAutomine", [True])
    row = await intake.get(harness.chain_id, op_hash)
    assert row is not None
    assert (row.status, row.tx_hash, row.reason) == (OpStatus.INCLUDED, tx_hash, None)


async def test_an_op_mined_long_before_the_takeover_is_found_from_its_validation_block(
    leading: Leading, harness: Harness, eth: EthClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The look-up reads a bounded range from the block the op was validated at, not back
    from the head: an op mined more than that range ago is still recognised."""
    _, intake, rpc = leading
    bundler = rpc.bundler
    op = await signed_op(harness)
    op_hash = await validated_into_intake(harness, intake, rpc, op)
    bundle = await harness.handle_ops([op])  # the dead leader's bundle
    await eth.rpc.request("anvil_mine", [hex(40)])
    # A node that answers eth_getLogs over 30 blocks at most: the op is out of that reach
    # back from the head, within it from its validation block.
    monkeypatch.setattr(bundler, "config", replace(bundler.config, receipt_lookback_blocks=30))
    monkeypatch.setattr(bundler.receipts, "lookback_blocks", 30)
    assert await bundler.receipts.receipt(hex_to_bytes(op_hash)) is None
    leader = IntakeLeader(bundler, intake)
    row = await settled(leader, intake, op_hash)
    assert (row.status, row.tx_hash) == (OpStatus.INCLUDED, bundle.receipt.tx_hash)
    assert len(bundler.mempool) == 0


async def test_an_op_refused_for_room_waits_in_the_intake_until_there_is_some(
    leading: Leading, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The API, its mempool empty, took a fifth op of an unstaked sender; the leader, four of
    that sender's ops pending, has no room for it yet: it waits, and is bundled after them."""
    monkeypatch.setattr("entryway.bundler.leader.RETRY_S", 0.0)
    leader, intake, rpc = leading
    deploy, owner = await owned_op(harness)
    await into_intake(harness, intake, deploy)
    await leader.step()
    await rpc.bundler.bundle_once(wait=True)
    ops = []
    for key in range(1, 6):  # distinct nonce keys: all five valid at once
        op = await harness.build_op(owner.address, b"", sender=deploy.sender, nonce=key << 64)
        ops.append(harness.sign(op, owner))
    hashes = [await into_intake(harness, intake, op) for op in ops]
    await leader.step()
    assert len(rpc.bundler.mempool) == 4
    fifth = await intake.get(harness.chain_id, hashes[4])
    assert fifth is not None and fifth.status is OpStatus.PENDING  # waiting, not dropped
    for _ in range(5):  # one op per sender in a bundle
        await rpc.bundler.bundle_once(wait=True)
        await leader.step()
    for op_hash in hashes:  # the fifth too: a dropped op would stay dropped
        assert (await settled(leader, intake, op_hash)).status is OpStatus.INCLUDED


# ---------------------------------------------------------------- ops the API validated


async def validated_into_intake(
    harness: Harness,
    intake: OpIntakeStore,
    rpc: BundlerRpc,
    op: UserOperation,
    *,
    validation: str | None = None,
) -> str:
    """The op written as an API replica writes it: with its validation, at the head."""
    block, now, _ = await rpc.bundler.head.now()
    outcome = await rpc.bundler.validator.validate(op, now=now)
    ep = harness.deployment.entry_point
    op_hash = "0x" + user_op_hash(op, ep, harness.chain_id).hex()
    await intake.add(
        chain_id=harness.chain_id,
        user_op_hash=op_hash,
        entry_point=ep,
        op=op,
        validation=outcome_to_json(outcome) if validation is None else validation,
        validated_block=block,
    )
    return op_hash


def count_validations(rpc: BundlerRpc, monkeypatch: pytest.MonkeyPatch) -> list[UserOperation]:
    """The ops the bundler's validator simulates from now on."""
    validator = rpc.bundler.validator
    real = validator.validate
    seen: list[UserOperation] = []

    async def counted(op: UserOperation, **kwargs: Any) -> ValidationOutcome:
        seen.append(op)
        return await real(op, **kwargs)

    monkeypatch.setattr(validator, "validate", counted)
    return seen


async def test_a_freshly_validated_op_is_admitted_without_simulating_it_again(
    leading: Leading, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    leader, intake, rpc = leading
    op_hash = await validated_into_intake(harness, intake, rpc, await signed_op(harness))
    validations = count_validations(rpc, monkeypatch)
    await leader.step()
    assert len(rpc.bundler.mempool) == 1
    assert validations == []  # admitted on the API's validation
    tx = await rpc.bundler.bundle_once(wait=True)
    row = await settled(leader, intake, op_hash)
    assert (row.status, row.tx_hash) == (OpStatus.INCLUDED, tx)


@pytest.mark.parametrize("why", ["stale", "unreadable"])
async def test_a_stale_or_unreadable_validation_is_made_again(
    leading: Leading, harness: Harness, monkeypatch: pytest.MonkeyPatch, eth: EthClient, why: str
) -> None:
    leader, intake, rpc = leading
    op = await signed_op(harness)
    broken = '{"preOpGas": "0x1", "prefund": [' if why == "unreadable" else None
    op_hash = await validated_into_intake(harness, intake, rpc, op, validation=broken)
    if why == "stale":
        await eth.rpc.request("anvil_mine", [hex(FRESH_BLOCKS + 1)])
        await asyncio.sleep(0.2)  # past the head read's reuse
    validations = count_validations(rpc, monkeypatch)
    await leader.step()
    assert validations == [op]  # simulated again
    assert len(rpc.bundler.mempool) == 1
    tx = await rpc.bundler.bundle_once(wait=True)
    row = await settled(leader, intake, op_hash)
    assert (row.status, row.tx_hash) == (OpStatus.INCLUDED, tx)


async def test_the_mempool_rules_hold_for_validated_ops(
    leading: Leading, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A same-nonce op without the fee bump is refused, though the API validated it."""
    leader, intake, rpc = leading
    first, owner = await owned_op(harness)
    first_hash = await validated_into_intake(harness, intake, rpc, first)
    twin = harness.sign(replace(first, call_gas_limit=first.call_gas_limit + 1), owner)
    twin_hash = await validated_into_intake(harness, intake, rpc, twin)
    validations = count_validations(rpc, monkeypatch)
    await leader.step()
    assert validations == []
    refused = await intake.get(harness.chain_id, twin_hash)
    assert refused is not None and refused.status is OpStatus.DROPPED
    assert refused.reason is not None
    assert refused.reason.startswith("refused by the mempool: replacement UserOperation must")
    assert [e.op for e in rpc.bundler.mempool.for_sender(first.sender)] == [first]
    await rpc.bundler.bundle_once(wait=True)
    assert (await settled(leader, intake, first_hash)).status is OpStatus.INCLUDED


async def test_each_entry_points_leader_bundles_only_its_ops(
    leading: Leading, harness: Harness
) -> None:
    """The chain's leader runs one intake leader per EntryPoint: a v0.7 op in the intake is
    bundled by v0.7's, never loaded by v0.8's."""
    v08_leader, intake, rpc = leading
    v07_rpc = rpc.siblings[V07.address.lower()]
    v07_leader = IntakeLeader(v07_rpc.bundler, intake)
    op, _ = await simple_account_op(harness, V07.address, FACTORY07)
    op_hash = "0x" + user_op_hash(op, V07.address, harness.chain_id).hex()
    await intake.add(
        chain_id=harness.chain_id, user_op_hash=op_hash, entry_point=V07.address, op=op
    )
    await v08_leader.step()
    assert len(rpc.bundler.mempool) == 0
    await v07_leader.step()
    assert len(v07_rpc.bundler.mempool) == 1
    tx = await v07_rpc.bundler.bundle_once(wait=True)
    row = await settled(v07_leader, intake, op_hash)
    assert (row.status, row.tx_hash) == (OpStatus.INCLUDED, tx)
