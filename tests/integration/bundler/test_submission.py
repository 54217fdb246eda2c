"""The executor's transaction manager on a real anvil: a stuck bundle transaction is replaced
with higher fees and the replacement is what gets mined; one the node lost is sent again a
block later; a nonce taken by another transaction is reported as dropped; a key that cannot
pay rests, and its refused replacement is tried again once it can; a bundle is followed
through a node outage, however long; its fees are raised a bounded number of times."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from entryway.bundler import submission
from entryway.bundler.submission import (
    ExecutorUnfundedError,
    StuckPolicy,
    TransactionDroppedError,
    TransactionManager,
)
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.chain.transactor import Transactor
from entryway.chain.transport import RpcTransportError
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


async def test_a_transaction_the_node_lost_is_sent_again_after_one_block(
    manual_chain: EthClient,
) -> None:
    """Not stuck by the policy's count of blocks (100), yet unknown to the node once a block
    went by without it: sent again at once."""
    eth = manual_chain
    manager = await funded_manager(eth, StuckPolicy(after_blocks=100, after_s=3600, quiet_s=0))
    tx = await manager.send(Harness.new_key().address, b"", 50_000, max_fee=2 * GWEI, priority=GWEI)
    assert await manager.poll(tx) is None  # no block yet: nothing concluded
    await eth.rpc.request("anvil_dropAllTransactions", [])  # evicted from the node's pool
    assert await manager.poll(tx) is None
    assert len(tx.attempts) == 1  # no block since: not judged lost yet
    await eth.rpc.request("evm_mine", [])  # a block passes without it
    assert await manager.poll(tx) is None
    assert len(tx.attempts) == 2
    await eth.rpc.request("evm_mine", [])
    receipt = await manager.poll(tx)
    assert receipt is not None and receipt.tx_hash == tx.attempts[1].tx_hash


async def test_an_executor_that_cannot_pay_rests_and_its_replacement_waits(
    manual_chain: EthClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A send the node refuses for want of funds raises ExecutorUnfundedError and the key is
    not picked for a while; a replacement refused so does not end the bundle's follow, and is
    tried again once the key is funded."""
    eth = manual_chain
    manager = await funded_manager(eth, StuckPolicy(after_blocks=1, after_s=3600, quiet_s=0))
    tx = await manager.send(Harness.new_key().address, b"", 50_000, max_fee=2 * GWEI, priority=GWEI)
    await eth.rpc.request("anvil_dropAllTransactions", [])
    await eth.rpc.request("anvil_setBalance", [manager.address, "0x0"])
    await eth.rpc.request("evm_mine", [])
    assert await manager.poll(tx) is None  # stuck; the replacement refused, not raised
    assert len(tx.attempts) == 1 and not manager.idle
    assert await manager.poll(tx) is None  # not tried again before REPLACE_RETRY_S
    assert len(tx.attempts) == 1

    monkeypatch.setattr(submission, "UNFUNDED_REST_S", 60.0)
    other = await funded_manager(eth, StuckPolicy())
    await eth.rpc.request("anvil_setBalance", [other.address, "0x0"])
    with pytest.raises(ExecutorUnfundedError):
        await other.send(Harness.new_key().address, b"", 50_000, max_fee=2 * GWEI, priority=GWEI)
    assert not other.idle and other.pending is None  # resting: bundles go with other keys

    await eth.rpc.request("anvil_setBalance", [manager.address, hex(10 * ETHER)])
    tx.replace_at = 0.0  # REPLACE_RETRY_S has passed
    assert await manager.poll(tx) is None
    assert len(tx.attempts) == 2
    await eth.rpc.request("evm_mine", [])
    receipt = await manager.poll(tx)
    assert receipt is not None and receipt.tx_hash == tx.attempts[1].tx_hash


async def test_a_bundle_is_followed_through_a_node_outage_longer_than_the_warning(
    manual_chain: EthClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A node that fails for longer than `warn_after_s` while a bundle is pending: said once
    at warning, the bundle still followed, and the key free again once it is mined (a key
    that gave up on its bundle would stay busy for good)."""
    eth = manual_chain
    manager = await funded_manager(eth, StuckPolicy(after_blocks=100, after_s=3600, quiet_s=0))
    tx = await manager.send(Harness.new_key().address, b"", 50_000, max_fee=2 * GWEI, priority=GWEI)
    outage = True
    read = eth.get_receipt

    async def failing(tx_hash: str) -> object:
        if outage:
            raise RpcTransportError()
        return await read(tx_hash)

    monkeypatch.setattr(eth, "get_receipt", failing)
    following = asyncio.create_task(manager.wait(tx, warn_after_s=0.2, poll_s=0.02))
    await asyncio.sleep(0.6)
    assert not following.done()  # past the warning, still followed
    assert not manager.idle
    await eth.rpc.request("evm_mine", [])
    outage = False
    receipt = await asyncio.wait_for(following, 10)
    assert receipt.tx_hash == tx.attempts[0].tx_hash
    assert manager.idle
    warned = [r for r in caplog.records if "still following" in r.getMessage()]
    assert len(warned) == 1 and warned[0].levelname == "WARNING"


async def test_a_bundles_fees_are_raised_at_most_max_bumps_times_and_a_lost_one_resent_as_is(
    manual_chain: EthClient,
) -> None:
    """Each bump is paid by the executor above what the ops pay back: past `max_bumps` the
    bundle keeps its fees, and one the node lost is sent again at them."""
    eth = manual_chain
    policy = StuckPolicy(after_blocks=1, after_s=3600, quiet_s=0, max_bumps=2)
    manager = await funded_manager(eth, policy)
    target = Harness.new_key().address
    tx = await manager.send(target, b"\x01", 50_000, max_fee=2 * GWEI, priority=1 * GWEI)
    for _ in range(4):  # a congested pool drops it block after block
        await eth.rpc.request("anvil_dropAllTransactions", [])
        await eth.rpc.request("evm_mine", [])
        assert await manager.poll(tx) is None
    fees = [(a.max_fee_per_gas, a.max_priority_fee_per_gas) for a in tx.attempts]
    # Two bumps, then the same transaction sent again as it was (one attempt, not one per
    # send: each attempt's receipt is asked for at every poll).
    assert len(fees) == 3
    assert fees[1] > fees[0] and fees[2] > fees[1]
    assert len({a.tx_hash for a in tx.attempts}) == 3
    await eth.rpc.request("evm_mine", [])  # mined: it was sent again after the last drop
    receipt = await manager.poll(tx)
    assert receipt is not None and receipt.tx_hash == tx.attempts[2].tx_hash
    assert manager.idle


async def test_a_bundle_at_its_fee_ceiling_the_node_still_holds_is_not_sent_again(
    manual_chain: EthClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """No bump left and the node still holds it (here, behind a nonce gap: never mined): it
    keeps its fees, is not sent again, is said once, and is looked at once a second, not at
    every poll."""
    eth = manual_chain
    policy = StuckPolicy(after_blocks=1, after_s=3600, quiet_s=0, max_bumps=0)
    manager = await funded_manager(eth, policy)
    ahead = await manager._nonce() + 1

    async def gap() -> int:
        return ahead

    monkeypatch.setattr(manager, "_nonce", gap)
    tx = await manager.send(Harness.new_key().address, b"", 50_000, max_fee=2 * GWEI, priority=GWEI)
    await eth.rpc.request("evm_mine", [])
    assert await manager.poll(tx) is None
    assert tx.replace_at > 0  # looked at again a second later
    looked: list[str] = []
    by_hash = manager._lost

    async def counted(pending: object) -> bool:
        looked.append("lost?")
        return await by_hash(pending)  # type: ignore[arg-type]

    monkeypatch.setattr(manager, "_lost", counted)
    for _ in range(3):
        assert await manager.poll(tx) is None
    assert looked == []  # not within the second
    tx.replace_at = 0.0  # the second has passed
    assert await manager.poll(tx) is None
    assert looked == ["lost?"]
    assert len(tx.attempts) == 1  # neither bumped nor sent again
    said = [r for r in caplog.records if "they stay there" in r.getMessage()]
    assert len(said) == 1 and said[0].levelname == "WARNING"
