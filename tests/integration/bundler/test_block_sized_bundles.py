"""Bundles sized by the devnet's block gas limit, and an operator's trusted entities, through
a bundler on the shared devnet (anvil, the real EntryPoint, validation traced)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from entryway import contracts
from entryway.bundler.bundle_sender import BundleSender
from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.standalone import StandaloneSettings, build_bundler
from entryway.bundler.states import BundlingMode
from entryway.chain.rpc import EthClient, RpcTransportError
from entryway.devnet.devnet import Devnet
from tests.integration.bundler.conftest import RpcClient
from tests.integration.harness import ETHER, Harness

EP = contracts.load("EntryPoint").abi
SHARE = 50


@pytest.fixture
async def trusting(devnet: Devnet, eth: EthClient, harness: Harness) -> AsyncIterator[RpcClient]:
    """A bundler trusting the devnet's paymaster and account factory, as a chain of the service
    trusts its own (an unstaked factory alone could have but ten first-time accounts pending,
    UREP-020), each bundle at most half the block."""
    executors = (Harness.new_key(), Harness.new_key())
    for key in executors:
        await eth.rpc.request("anvil_setBalance", [key.address, hex(1000 * ETHER)])
    settings = StandaloneSettings(
        rpc_url=devnet.chains[0].rpc_url,
        entry_point=devnet.chains[0].deployment.entry_point,
        executor_keys=executors,
        debug_rpc=True,
        mode=BundlingMode.MANUAL,
        block_gas_share_percent=SHARE,
        trusted_entities=(harness.deployment.paymaster, harness.deployment.account_factory),
    )
    rpc: BundlerRpc = await build_bundler(eth, settings)
    await rpc.start()
    try:
        yield RpcClient(rpc, rpc.bundler.config.entry_point)
    finally:
        await rpc.stop()


@pytest.fixture
async def block_gas_limit(eth: EthClient) -> AsyncIterator[int]:
    """The devnet's block gas limit, put back after the test."""
    before = int((await eth.get_block("latest"))["gasLimit"], 16)
    yield before
    await eth.rpc.request("evm_setBlockGasLimit", [hex(before)])
    await eth.rpc.request("anvil_mine", ["0x1"])


async def set_block_gas_limit(eth: EthClient, gas: int) -> None:
    await eth.rpc.request("evm_setBlockGasLimit", [hex(gas)])
    await eth.rpc.request("anvil_mine", ["0x1"])


async def sponsored_ops(harness: Harness, client: RpcClient, count: int) -> list[str]:
    hashes = []
    for _ in range(count):
        owner = harness.new_key()
        draft = await harness.build_op(
            owner.address, b"", verification_gas=400_000, call_gas=50_000
        )
        hashes.append(await client.send(harness.sign(harness.sponsor(draft), owner)))
    return hashes


async def bundle_tx(eth: EthClient, tx_hash: str) -> tuple[int, int]:
    """(the bundle transaction's gas limit, its UserOperationEvents)."""
    tx = await eth.rpc.request("eth_getTransactionByHash", [tx_hash])
    receipt = await eth.get_receipt(tx_hash)
    assert receipt is not None
    topic = EP.event_topic("UserOperationEvent")
    events = sum(1 for log in receipt.logs if log.topics and log.topics[0] == topic)
    return int(tx["gas"], 16), events


async def test_a_bundle_carries_more_than_64_ops_when_the_block_allows(
    trusting: RpcClient, harness: Harness, eth: EthClient, block_gas_limit: int
) -> None:
    await set_block_gas_limit(eth, 200_000_000)
    hashes = await sponsored_ops(harness, trusting, 70)
    tx_hash = await trusting.bundle()
    gas, events = await bundle_tx(eth, tx_hash)
    assert events == 70 and gas <= 200_000_000 * SHARE // 100
    for op_hash in hashes:
        receipt = await trusting.result("eth_getUserOperationReceipt", op_hash)
        assert receipt["success"] and receipt["receipt"]["transactionHash"] == tx_hash


async def test_a_bundle_stays_within_its_share_and_left_out_ops_keep_their_order(
    trusting: RpcClient, harness: Harness, eth: EthClient, block_gas_limit: int
) -> None:
    await set_block_gas_limit(eth, 6_000_000)  # 3,000,000 a bundle: fewer than ten ops
    hashes = await sponsored_ops(harness, trusting, 12)
    tx_hash = await trusting.bundle()
    gas, events = await bundle_tx(eth, tx_hash)
    assert 0 < events < 12 and gas <= 6_000_000 * SHARE // 100
    # Same fees: the oldest went, the rest wait in the order they came.
    for op_hash in hashes[:events]:
        receipt = await trusting.result("eth_getUserOperationReceipt", op_hash)
        assert receipt["receipt"]["transactionHash"] == tx_hash
    pool = await trusting.result("debug_bundler_dumpMempool", trusting.entry_point)
    assert len(pool) == 12 - events
    await set_block_gas_limit(eth, block_gas_limit)
    second = await trusting.bundle()
    assert (await bundle_tx(eth, second))[1] == 12 - events
    for op_hash in hashes[events:]:
        receipt = await trusting.result("eth_getUserOperationReceipt", op_hash)
        assert receipt["receipt"]["transactionHash"] == second


async def test_a_trusted_paymaster_is_not_throttled_and_the_dump_shows_it(
    trusting: RpcClient, client: RpcClient, harness: Harness
) -> None:
    pm, factory = harness.deployment.paymaster, harness.deployment.account_factory
    unseen = {"opsSeen": 0, "opsIncluded": 0, "status": 0, "trusted": True}
    dump = await trusting.result("debug_bundler_dumpReputation", trusting.entry_point)
    assert sorted(dump, key=lambda e: e["address"]) == sorted(
        [{"address": pm, **unseen}, {"address": factory, **unseen}], key=lambda e: e["address"]
    )
    banned = [{"address": pm, "opsSeen": 1000, "opsIncluded": 0}]
    for bundler in (trusting, client):  # the shared bundler does not trust it
        await bundler.result("debug_bundler_setReputation", banned, bundler.entry_point)
    dump = await trusting.result("debug_bundler_dumpReputation", trusting.entry_point)
    assert {"address": pm, "opsSeen": 1000, "opsIncluded": 0, "status": 0, "trusted": True} in dump
    owner = harness.new_key()
    op = harness.sign(harness.sponsor(await harness.build_op(owner.address, b"")), owner)
    refused = await client.send_error(op)
    await client.result("debug_bundler_clearReputation")  # the shared bundler, as it was
    assert refused["code"] == -32504 and "banned" in refused["message"]
    op_hash = await trusting.send(op)
    await trusting.bundle()
    assert (await trusting.result("eth_getUserOperationReceipt", op_hash))["success"]


async def test_when_one_bundle_cannot_carry_the_ready_ops_another_executor_sends_the_rest(
    trusting: RpcClient, harness: Harness, eth: EthClient, block_gas_limit: int
) -> None:
    await set_block_gas_limit(eth, 6_000_000)  # fewer than ten ops a bundle
    hashes = await sponsored_ops(harness, trusting, 12)
    bundler = trusting.rpc.bundler
    before = bundler.counts.bundles_sent
    await bundler.fill_block()  # what auto mode does when a block is due
    assert bundler.counts.bundles_sent - before >= 2  # one bundle could not carry them all
    await asyncio.gather(*bundler.sender.following)
    for _ in range(3):  # what the block's gas left for a later block
        if not await trusting.result("debug_bundler_dumpMempool", trusting.entry_point):
            break
        await bundler.fill_block()
        await asyncio.gather(*bundler.sender.following)
    assert await trusting.result("debug_bundler_dumpMempool", trusting.entry_point) == []
    txs = []
    for op_hash in hashes:
        receipt = await trusting.result("eth_getUserOperationReceipt", op_hash)
        assert receipt["success"]
        txs.append(receipt["receipt"]["transactionHash"])
    assert len(set(txs)) >= 2  # a bundle carries fewer than ten of the twelve
    senders = set()
    for tx_hash in set(txs):
        gas, _ = await bundle_tx(eth, tx_hash)
        assert gas <= 6_000_000 * SHARE // 100
        senders.add((await eth.rpc.request("eth_getTransactionByHash", [tx_hash]))["from"])
    assert len(senders) == 2  # both executor keys sent


async def test_a_bundle_whose_checks_are_slow_does_not_hold_up_the_next_one(
    trusting: RpcClient, harness: Harness, eth: EthClient, block_gas_limit: int
) -> None:
    """Two bundles for one block: the first one's checks (the second validation) are held
    up; the second is checked and sent meanwhile, with the other executor key, and carries
    none of the first one's ops. Released, the first is sent too, and every op is mined once."""
    await set_block_gas_limit(eth, 6_000_000)  # fewer than ten ops a bundle
    hashes = await sponsored_ops(harness, trusting, 12)
    bundler = trusting.rpc.bundler
    revalidate = bundler.validator.revalidate
    release, held = asyncio.Event(), asyncio.Event()
    checked: list[list[str]] = []

    async def first_held(ops: Any, *args: Any, **kwargs: Any) -> Any:
        checked.append([op.sender for op in ops])
        if len(checked) == 1:
            held.set()
            await release.wait()
        return await revalidate(ops, *args, **kwargs)

    bundler.validator.revalidate = first_held  # type: ignore[method-assign]
    before = bundler.counts.bundles_sent
    filling = asyncio.create_task(bundler.fill_block())
    await asyncio.wait_for(held.wait(), 10)
    for _ in range(200):
        if bundler.counts.bundles_sent > before:
            break
        await asyncio.sleep(0.05)
    assert bundler.counts.bundles_sent - before == 1  # the second, while the first is held
    assert not filling.done()
    assert not set(checked[0]) & set(checked[1])  # no op in both
    release.set()
    await asyncio.wait_for(filling, 30)
    assert bundler.counts.bundles_sent - before == 2
    await asyncio.gather(*bundler.sender.following)
    mined = {}
    for op_hash in hashes:
        receipt = await trusting.result("eth_getUserOperationReceipt", op_hash)
        if receipt is not None:
            assert receipt["success"]
            mined[op_hash] = receipt["receipt"]["transactionHash"]
    assert len(mined) == len(checked[0]) + len(checked[1])
    assert len(set(mined.values())) == 2


async def test_bundlers_sharing_the_executor_keys_never_pick_the_same_one(
    trusting: RpcClient, harness: Harness
) -> None:
    """Each EntryPoint's bundler chooses its bundles under a lock of its own, and they share
    the chain's executor keys. Two choosing at once, both held up reading the head: each gets
    a key of its own (the key is reserved when picked, not once the ops are chosen)."""
    await sponsored_ops(harness, trusting, 2)
    bundler = trusting.rpc.bundler
    first, second = bundler.sender, BundleSender(bundler)  # two senders over the same keys
    read_head = bundler.head.now
    gate = asyncio.Event()

    async def held(*args: Any, **kwargs: Any) -> Any:
        await gate.wait()
        return await read_head(*args, **kwargs)

    bundler.head.now = held  # type: ignore[method-assign]
    try:
        choosing = asyncio.gather(first._claim(), second._claim())
        await asyncio.sleep(0.1)  # both have picked a key and wait for the head
        gate.set()
        a, b = await choosing
    finally:
        bundler.head.now = read_head  # type: ignore[method-assign]
    assert a is not None and b is not None
    assert a.executor is not b.executor
    for sender, claim in ((first, a), (second, b)):
        claim.executor.reserved = False
        sender._claims.discard(claim)


async def test_a_failed_choice_lets_the_bundle_under_way_go_out_first(
    trusting: RpcClient, harness: Harness, eth: EthClient, block_gas_limit: int
) -> None:
    """The node fails the head read of the block's second bundle: the first, already chosen,
    is still checked and sent before the failure is reported."""
    await set_block_gas_limit(eth, 6_000_000)  # fewer than ten ops a bundle
    await sponsored_ops(harness, trusting, 12)
    bundler = trusting.rpc.bundler
    read_head = bundler.head.now
    reads = 0

    async def second_fails(*args: Any, **kwargs: Any) -> Any:
        nonlocal reads
        reads += 1
        if reads == 2:
            raise RpcTransportError("the node went away")
        return await read_head(*args, **kwargs)

    bundler.head.now = second_fails  # type: ignore[method-assign]
    before = bundler.counts.bundles_sent
    try:
        with pytest.raises(RpcTransportError):
            await bundler.fill_block()
    finally:
        bundler.head.now = read_head  # type: ignore[method-assign]
    assert bundler.counts.bundles_sent - before == 1
    assert all(e.idle or e.pending is not None for e in bundler.executors)
    await asyncio.gather(*bundler.sender.following)
