"""Validation simulates on the latest block; an op the EntryPoint refuses there is checked
again on the pending block, where a transaction the node holds but has not mined yet (here,
the one funding the op's sender) already counts. At admission and at the second validation
before bundling alike. And the other side of a bundle the node holds back: an executor key
it refuses for want of funds leaves its op waiting in the mempool."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from entryway.bundler.errors import BundlerError
from entryway.domain.evm import checksum, hex_to_bytes
from entryway.domain.userop import UserOperation
from tests.integration.bundler.conftest import RpcClient
from tests.integration.harness import ETHER, Harness


@asynccontextmanager
async def mining_held(harness: Harness) -> AsyncIterator[None]:
    """The node keeps new transactions pending until the block is over."""
    await harness.eth.rpc.request("evm_setAutomine", [False])
    try:
        yield
    finally:
        await harness.eth.rpc.request("evm_mine", [])
        await harness.eth.rpc.request("evm_setAutomine", [True])


async def fund_pending(harness: Harness, to: str) -> None:
    """Send the sender its gas money in a transaction the node holds, not mined."""
    executor = harness.executor
    max_fee, priority = await executor.fees()
    tx = {
        "type": 2,
        "chainId": harness.chain_id,
        "nonce": await harness.eth.get_nonce(executor.address, "pending"),
        "to": checksum(to),
        "value": ETHER,
        "data": "0x",
        "gas": 21_000,
        "maxFeePerGas": max_fee,
        "maxPriorityFeePerGas": priority,
    }
    signed = executor.account.sign_transaction(tx)
    await harness.eth.send_raw_transaction(bytes(signed.raw_transaction))


async def self_paid_op(harness: Harness) -> UserOperation:
    owner = harness.new_key()
    return harness.sign(await harness.build_op(owner.address, b""), owner)


async def test_an_op_whose_sender_is_funded_by_a_pending_transaction_is_accepted(
    client: RpcClient, harness: Harness
) -> None:
    op = await self_paid_op(harness)
    unfunded = await client.send_error(op)
    assert "AA21" in unfunded["message"]  # on the latest block and the pending one alike

    async with mining_held(harness):
        await fund_pending(harness, op.sender)
        assert await harness.eth.get_balance(op.sender) == 0  # not on the latest block
        op_hash = await client.send(op)

    await client.bundle()
    receipt = await client.result("eth_getUserOperationReceipt", op_hash)
    assert receipt["success"] is True


async def test_the_second_validation_checks_a_refused_op_again_on_the_pending_block(
    client: RpcClient, harness: Harness
) -> None:
    bundler = client.rpc.bundler
    op = await self_paid_op(harness)
    await harness.fund(op.sender, ETHER)
    now, block = await harness.latest_timestamp(), await harness.eth.block_number()
    admitted = await bundler.validator.validate(op, now=now, block=block)

    await harness.fund(op.sender, 0)  # the latest block: nothing to pay with
    async with mining_held(harness):
        await fund_pending(harness, op.sender)
        (checked,), _ = await bundler.validator.revalidate([op], [admitted], now=now, block=block)
        assert not isinstance(checked, BaseException), checked

    # Refused on both blocks: refused.
    await harness.fund(op.sender, 0)
    (refused,), _ = await bundler.validator.revalidate([op], [admitted], now=now, block=block)
    assert isinstance(refused, BundlerError) and "AA21" in refused.message


async def test_ops_wait_for_a_key_that_can_pay(client: RpcClient, harness: Harness) -> None:
    """An executor key the node refuses a bundle for want of funds: the bundle is not sent,
    its op waits in the mempool and no client is refused; funded again, the key bundles it."""
    bundler = client.rpc.bundler
    [key] = bundler.executors
    owner = harness.new_key()
    op = harness.sign(await harness.build_op(owner.address, b""), owner)
    await harness.fund(op.sender, ETHER)
    op_hash = await client.send(op)
    funds = await harness.eth.get_balance(key.address)
    await harness.fund(key.address, 0)
    try:
        assert await bundler.bundle_once(wait=False) is None  # refused: not raised
        assert bundler.mempool.get(hex_to_bytes(op_hash)) is not None
        assert not key.idle and key.pending is None  # resting, holding no bundle
        status = await client.result("entryway_getUserOperationStatus", op_hash)
        assert status["status"] == "pending"
    finally:
        await harness.fund(key.address, funds)
    key.resting_until = 0.0  # its rest is over
    tx_hash = await client.bundle()
    receipt = await client.result("eth_getUserOperationReceipt", op_hash)
    assert receipt["success"] is True
    assert receipt["receipt"]["transactionHash"] == tx_hash
