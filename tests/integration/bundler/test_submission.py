"""The executor's transaction manager on a real anvil: a stuck bundle transaction is replaced
with higher fees and the replacement is what gets mined; a nonce taken by another transaction
is reported as dropped."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from entryway.bundler.submission import StuckPolicy, TransactionDroppedError, TransactionManager
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.chain.transactor import Transactor
from entryway.devnet.anvil import AnvilConfig, AnvilProcess
from tests.integration.harness import ETHER, Harness

GWEI = 10**9


@pytest.fixture
async def manual_chain() -> AsyncIterator[EthClient]:
    """A node that mines only when told to, so transactions can sit pending."""
    node = AnvilProcess(AnvilConfig(chain_id=31337))
    await node.start()
    try:
        async with JsonRpcClient(node.rpc_url) as rpc:
            await rpc.request("evm_setAutomine", [False])
            yield EthClient(rpc)
    finally:
        await node.stop()


async def funded_manager(eth: EthClient, stuck: StuckPolicy) -> TransactionManager:
    key = Harness.new_key()
    await eth.rpc.request("anvil_setBalance", [key.address, hex(10 * ETHER)])
    return TransactionManager(eth, key, 31337, stuck=stuck)


async def test_a_stuck_transaction_is_replaced_and_the_replacement_mined(
    manual_chain: EthClient,
) -> None:
    eth = manual_chain
    manager = await funded_manager(eth, StuckPolicy(after_blocks=1, after_s=3600, quiet_s=0))
    target = Harness.new_key().address
    tx = await manager.send(target, b"\x01", 50_000, max_fee=2 * GWEI, priority=1 * GWEI)
    assert await manager.poll(tx) is None  # pending, not yet stuck
    assert len(tx.attempts) == 1
    await eth.rpc.request("anvil_dropAllTransactions", [])  # what a congested pool might do
    await eth.rpc.request("evm_mine", [])  # a block passes without it
    assert await manager.poll(tx) is None  # now stuck: replaced
    assert len(tx.attempts) == 2
    first, second = tx.attempts
    assert second.max_priority_fee_per_gas >= first.max_priority_fee_per_gas * 110 // 100
    assert second.max_fee_per_gas >= first.max_fee_per_gas * 110 // 100
    await eth.rpc.request("evm_mine", [])
    receipt = await manager.poll(tx)
    assert receipt is not None and receipt.tx_hash == second.tx_hash
    assert await eth.get_receipt(first.tx_hash) is None
    assert manager.idle


async def test_a_nonce_used_by_someone_else_is_reported_dropped(manual_chain: EthClient) -> None:
    eth = manual_chain
    manager = await funded_manager(eth, StuckPolicy(after_blocks=100, after_s=3600, quiet_s=0))
    tx = await manager.send(Harness.new_key().address, b"", 50_000, max_fee=2 * GWEI, priority=GWEI)
    await eth.rpc.request("anvil_dropAllTransactions", [])
    # The same key, outside the manager, spends that nonce on something else.
    other = Transactor(eth, manager.account, 31337)
    await eth.rpc.request("evm_setAutomine", [True])
    await other.send(Harness.new_key().address, b"", value=1, gas=21_000)
    with pytest.raises(TransactionDroppedError):
        await manager.poll(tx)
    assert manager.idle
