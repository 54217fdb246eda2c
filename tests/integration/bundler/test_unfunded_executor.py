"""An executor key the node refuses a bundle for want of funds: nothing is lost and no client
is refused. The bundle is not sent, its ops wait in the mempool, the key rests; funded again,
it bundles them (real devnet, the session's bundler and its one key)."""

from __future__ import annotations

from entryway.domain.evm import hex_to_bytes
from tests.integration.bundler.conftest import RpcClient
from tests.integration.harness import ETHER, Harness


async def test_ops_wait_for_a_key_that_can_pay(client: RpcClient, harness: Harness) -> None:
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
