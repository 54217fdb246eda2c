"""Real reorgs on anvil (evm_snapshot / evm_revert and new blocks) of the block a self-paid
op was mined in. The bundler that mined it sends it to the mempool again when it still
validates, and it is mined again, its receipt then in a block of the new chain; an op that
no longer validates there (its sender's nonce used by another op) is reported dropped, and
why. Mined receipts and statuses say how deep their block is."""

from __future__ import annotations

from typing import Any

import httpx
from eth_account.signers.local import LocalAccount

from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.rpc_types import user_operation_json
from entryway.bundler.service import Bundler
from entryway.chain.finality import Finality
from entryway.chain.follower import BlockRef
from entryway.chain.following import ChainFollower
from entryway.chain.rpc import EthClient
from entryway.domain.plans import PlanName
from entryway.domain.userop import UserOperation
from entryway.service.services import Services
from tests.integration.bundler.conftest import RpcClient
from tests.integration.bundler.test_service_chain_routes import CHAIN, rpc, service, tenant
from tests.integration.harness import ETHER, Harness

__all__ = ["service"]


def following(eth: EthClient, bundler: Bundler) -> ChainFollower:
    """The chain's follower, telling the bundler of the blocks a reorg removes (as the
    service wires it)."""

    async def removed(_chain_id: int, blocks: list[BlockRef]) -> None:
        await bundler.blocks_removed([b.number for b in blocks])

    return ChainFollower(eth, CHAIN, Finality(2, 16), on_removed=removed)


async def self_paid(
    harness: Harness, owner: LocalAccount | None = None, *, call_gas: int = 300_000
) -> UserOperation:
    """A new account's first op (it deploys the account), paid from the account's own ETH."""
    owner = owner or harness.new_key()
    op = await harness.build_op(owner.address, b"", call_gas=call_gas)
    await harness.fund(op.sender, ETHER)
    return harness.sign(op, owner)


async def receipt(client: RpcClient, op_hash: str) -> dict[str, Any] | None:
    found: dict[str, Any] | None = await client.result("eth_getUserOperationReceipt", op_hash)
    return found


async def status(client: RpcClient, op_hash: str) -> dict[str, Any]:
    found: dict[str, Any] = await client.result("entryway_getUserOperationStatus", op_hash)
    return found


async def canonical_hash(eth: EthClient, number: int) -> str:
    return str((await eth.get_block(hex(number)))["hash"])


async def test_a_mined_op_says_how_deep_it_is_and_when_it_is_final(
    client: RpcClient, harness: Harness, eth: EthClient
) -> None:
    bundler = client.rpc.bundler
    op_hash = await client.send(await self_paid(harness))
    await client.bundle()
    mined = await receipt(client, op_hash)
    assert mined is not None and mined["confirmations"] == "0x1"
    assert "final" not in mined  # this bundler alone does not know the chain's depth
    assert (await status(client, op_hash))["confirmations"] == "0x1"
    try:
        bundler.receipts.finality = Finality(2, 16)  # as the service that follows the chain
        mined = await receipt(client, op_hash)
        assert mined is not None and (mined["confirmations"], mined["final"]) == ("0x1", False)
        await eth.rpc.request("anvil_mine", ["0x1"])
        deeper = await receipt(client, op_hash)
        assert deeper is not None and (deeper["confirmations"], deeper["final"]) == ("0x2", True)
        assert {k: v for k, v in deeper.items() if k not in ("confirmations", "final")} == {
            k: v for k, v in mined.items() if k not in ("confirmations", "final")
        }  # the ERC-4337 fields are unchanged
        report = await status(client, op_hash)
        assert report["status"] == "included"
        assert (report["confirmations"], report["final"]) == ("0x2", True)
    finally:
        bundler.receipts.finality = None


async def test_an_op_whose_block_a_reorg_removed_is_mined_again(
    client: RpcClient, harness: Harness, eth: EthClient
) -> None:
    follower = following(eth, client.rpc.bundler)
    await follower.step()
    op_hash = await client.send(await self_paid(harness))
    snapshot = await eth.rpc.request("evm_snapshot")
    await client.bundle()
    first = await receipt(client, op_hash)
    assert first is not None
    block = int(first["receipt"]["blockNumber"], 16)
    await follower.step()

    assert await eth.rpc.request("evm_revert", [snapshot]) is True
    await eth.rpc.request("anvil_mine", ["0x2"])
    removed = await follower.step()
    assert block in [b.number for b in removed]
    assert await receipt(client, op_hash) is None
    assert await status(client, op_hash) == {"status": "pending"}  # back in the mempool
    dumped = await client.result("debug_bundler_dumpMempool", client.entry_point)
    assert [op["sender"] for op in dumped] == [first["sender"]]

    await client.bundle()
    again = await receipt(client, op_hash)
    assert again is not None and again["success"] is True
    new_block = int(again["receipt"]["blockNumber"], 16)
    assert new_block > block and again["receipt"]["blockHash"] != first["receipt"]["blockHash"]
    assert again["receipt"]["blockHash"] == await canonical_hash(eth, new_block)
    assert again["confirmations"] == "0x1"
    report = await status(client, op_hash)
    assert report["status"] == "included"
    assert report["transactionHash"] == again["receipt"]["transactionHash"]


async def test_a_status_read_alone_sends_a_reorged_op_back(
    client: RpcClient, harness: Harness, eth: EthClient
) -> None:
    """No follower told the bundler: asking for the op's status finds its event gone."""
    op_hash = await client.send(await self_paid(harness))
    snapshot = await eth.rpc.request("evm_snapshot")
    await client.bundle()
    assert (await status(client, op_hash))["status"] == "included"
    assert await eth.rpc.request("evm_revert", [snapshot]) is True
    await eth.rpc.request("anvil_mine", ["0x2"])
    assert await status(client, op_hash) == {"status": "pending"}
    await client.bundle()
    again = await receipt(client, op_hash)
    assert again is not None and again["success"] is True


async def test_an_op_no_longer_valid_on_the_new_chain_is_reported_dropped(
    client: RpcClient, harness: Harness, eth: EthClient
) -> None:
    bundler = client.rpc.bundler
    follower = following(eth, bundler)
    await follower.step()
    owner = harness.new_key()
    op = await self_paid(harness, owner)
    op_hash = await client.send(op)
    snapshot = await eth.rpc.request("evm_snapshot")
    await client.bundle()
    first = await receipt(client, op_hash)
    assert first is not None
    await follower.step()
    dropped_before = bundler.counts.ops_dropped

    assert await eth.rpc.request("evm_revert", [snapshot]) is True
    # On the new chain another op of the same sender, at the same nonce, is mined first.
    rival = await self_paid(harness, owner, call_gas=300_001)
    assert (rival.sender, rival.nonce) == (op.sender, op.nonce)
    rival_hash = await client.send(rival)
    await client.bundle()
    assert (await receipt(client, rival_hash)) is not None

    removed = await follower.step()
    assert int(first["receipt"]["blockNumber"], 16) in [b.number for b in removed]
    report = await status(client, op_hash)
    assert report["status"] == "dropped"
    assert report["reason"].startswith("its block left the chain and it no longer validates: ")
    assert await receipt(client, op_hash) is None
    assert await client.result("debug_bundler_dumpMempool", client.entry_point) == []
    assert bundler.counts.ops_dropped == dropped_before + 1


async def test_the_service_op_status_says_how_deep_a_mined_op_is(
    service: tuple[httpx.AsyncClient, Services],
    harness: Harness,
    bundler_rpc: BundlerRpc,
    eth: EthClient,
) -> None:
    http, services = service
    _, key = await tenant(services, PlanName.FREE, [CHAIN])
    auth = {"Authorization": f"Bearer {key}"}
    op = await self_paid(harness)
    send = rpc("eth_sendUserOperation", user_operation_json(op), harness.deployment.entry_point)
    op_hash = (await http.post(f"/rpc/{CHAIN}", headers=auth, json=send)).json()["result"]
    query = {"chainId": CHAIN, "userOpHash": op_hash}
    pending = (await http.get("/op-status", params=query, headers=auth)).json()
    assert pending["status"] == "pending" and "confirmations" not in pending
    await bundler_rpc.dispatch(rpc("debug_bundler_sendBundleNow"))
    bundler_rpc.bundler.receipts.finality = Finality(3, 16)  # the chain's depths, as followed
    try:
        mined = (await http.get("/op-status", params=query, headers=auth)).json()
        assert (mined["status"], mined["confirmations"], mined["final"]) == (
            "included",
            "0x1",
            False,
        )
        await eth.rpc.request("anvil_mine", ["0x2"])
        deep = (await http.get("/op-status", params=query, headers=auth)).json()
        assert (deep["confirmations"], deep["final"]) == ("0x3", True)
    finally:
        bundler_rpc.bundler.receipts.finality = None
