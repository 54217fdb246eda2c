"""Methods and tags some nodes do not serve: the tip suggestion falls back to
eth_feeHistory, then to eth_gasPrice less the base fee; the "safe" and "finalized" blocks to
a confirmation depth; each said once in the log."""

from __future__ import annotations

import logging

import pytest

from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.devnet.anvil import AnvilProcess
from tests.node_kinds.fixtures import RelayFactory

GWEI = 10**9


async def tipped_blocks(node: JsonRpcClient) -> None:
    """Five blocks, each of one transaction tipping 1 to 5 gwei: their median tip is 3."""
    accounts = await node.request("eth_accounts")
    eth = EthClient(node)
    for tip in range(1, 6):
        tx = {
            "from": accounts[tip],
            "to": accounts[0],
            "value": "0x1",
            "maxPriorityFeePerGas": hex(tip * GWEI),
            "maxFeePerGas": hex(100 * GWEI),
        }
        await eth.wait_for_receipt(await node.request("eth_sendTransaction", [tx]), within_s=10)


async def test_tips_come_from_the_fee_history_where_none_is_suggested(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory, caplog: pytest.LogCaptureFixture
) -> None:
    relay = await node_relays(
        standalone_anvil.rpc_url, "public", missing_methods={"eth_maxPriorityFeePerGas"}
    )
    async with JsonRpcClient(standalone_anvil.rpc_url) as node:
        await tipped_blocks(node)
        suggested = int(await node.request("eth_maxPriorityFeePerGas"), 16)
    assert suggested != 3 * GWEI  # anvil's own suggestion is another number
    async with JsonRpcClient(relay.url) as rpc:
        eth = EthClient(rpc)
        with caplog.at_level(logging.INFO, logger="entryway.chain"):
            assert await eth.max_priority_fee() == 3 * GWEI
            assert await eth.max_priority_fee() == 3 * GWEI
    said = [r for r in caplog.records if "eth_maxPriorityFeePerGas" in r.getMessage()]
    assert len(said) == 1
    assert relay.forwarded["eth_feeHistory"] == 2


async def test_tips_come_from_the_gas_price_where_no_fee_history_is_served(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory
) -> None:
    relay = await node_relays(
        standalone_anvil.rpc_url,
        "public",
        missing_methods={"eth_maxPriorityFeePerGas", "eth_feeHistory"},
    )
    async with JsonRpcClient(standalone_anvil.rpc_url) as node:
        await tipped_blocks(node)
        gas_price = int(await node.request("eth_gasPrice"), 16)
        block = await node.request("eth_getBlockByNumber", ["latest", False])
    async with JsonRpcClient(relay.url) as rpc:
        tip = await EthClient(rpc).max_priority_fee()
    assert tip == gas_price - int(block["baseFeePerGas"], 16)
    assert relay.forwarded["eth_gasPrice"] == 1


async def test_a_served_suggestion_is_taken_as_it_is(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory
) -> None:
    relay = await node_relays(standalone_anvil.rpc_url, "hosted")
    async with JsonRpcClient(relay.url) as rpc:
        tip = await EthClient(rpc).max_priority_fee()
    async with JsonRpcClient(standalone_anvil.rpc_url) as node:
        assert tip == int(await node.request("eth_maxPriorityFeePerGas"), 16)
    assert relay.forwarded == {"eth_maxPriorityFeePerGas": 1}


@pytest.mark.parametrize("tag", ["safe", "finalized"])
async def test_an_unserved_tag_is_a_confirmation_depth(
    standalone_anvil: AnvilProcess,
    node_relays: RelayFactory,
    caplog: pytest.LogCaptureFixture,
    tag: str,
) -> None:
    missing = await node_relays(standalone_anvil.rpc_url, "public", missing_block_tags={tag})
    served = await node_relays(standalone_anvil.rpc_url, "public")
    async with JsonRpcClient(standalone_anvil.rpc_url) as node:
        await node.request("anvil_mine", ["0x50"])
        latest = int(await node.request("eth_blockNumber"), 16)
        own = int((await node.request("eth_getBlockByNumber", [tag, False]))["number"], 16)
    async with JsonRpcClient(missing.url) as rpc:
        eth = EthClient(rpc)
        with caplog.at_level(logging.INFO, logger="entryway.chain"):
            assert int((await eth.settled_block(tag, 10))["number"], 16) == latest - 9
            assert int((await eth.settled_block(tag, 10))["number"], 16) == latest - 9
    assert len([r for r in caplog.records if f'"{tag}"' in r.getMessage()]) == 1
    async with JsonRpcClient(served.url) as rpc:
        assert own != latest - 9
        assert int((await EthClient(rpc).settled_block(tag, 10))["number"], 16) == own
