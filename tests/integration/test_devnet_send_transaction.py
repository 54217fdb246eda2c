"""Scripts and tools send a dev account's transaction with `eth_sendTransaction` and no fee
fields; every devnet fills the fees as its real network's node would."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from entryway.chain.rpc import JsonRpcClient, RpcError
from entryway.devnet.devnet import Devnet
from entryway.domain.networks import GWEI

POLYGON_CHAINS = (137, 80002)
BASE_CHAINS = (8453, 84532)


@pytest.fixture(scope="module")
async def chains(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Devnet]:
    data_dir: Path = tmp_path_factory.mktemp("devnet-send")
    async with Devnet(data_dir, [*POLYGON_CHAINS, *BASE_CHAINS]) as net:
        yield net


async def _send(devnet: Devnet, chain_id: int, **fields: str) -> dict[str, str]:
    """A dev account's 1 wei transfer, mined; the transaction as the chain holds it."""
    url = next(c.rpc_url for c in devnet.chains if c.chain_id == chain_id)
    async with JsonRpcClient(url) as rpc:
        accounts = await rpc.request("eth_accounts", [])
        tx = {"from": accounts[0], "to": accounts[1], "value": "0x1", **fields}
        tx_hash = await rpc.request("eth_sendTransaction", [tx])
        receipt = await _mined(rpc, tx_hash)
        assert receipt["status"] == "0x1"
        mined = await rpc.request("eth_getTransactionByHash", [tx_hash])
        assert isinstance(mined, dict)
        return mined


async def _mined(rpc: JsonRpcClient, tx_hash: str, within_s: float = 10.0) -> dict[str, str]:
    """The receipt, once the block is sealed: anvil answers with the hash before its miner
    has sealed the block, which on a busy machine is not yet done when the next call comes."""
    deadline = asyncio.get_running_loop().time() + within_s
    while (receipt := await rpc.request("eth_getTransactionReceipt", [tx_hash])) is None:
        assert asyncio.get_running_loop().time() < deadline, f"{tx_hash} not mined"
        await asyncio.sleep(0.05)
    assert isinstance(receipt, dict)
    return receipt


@pytest.mark.parametrize("chain_id", POLYGON_CHAINS)
async def test_polygon_devnet_fills_the_25_gwei_tip(chains: Devnet, chain_id: int) -> None:
    mined = await _send(chains, chain_id)
    assert mined["type"] == "0x2"
    tip, cap = int(mined["maxPriorityFeePerGas"], 16), int(mined["maxFeePerGas"], 16)
    assert tip >= 25 * GWEI  # anvil alone would put 1 gwei, under Polygon's minimum
    assert cap >= 2 * 5 * GWEI + tip  # room for the 5 gwei base fee to double


@pytest.mark.parametrize("chain_id", BASE_CHAINS)
async def test_base_devnet_takes_a_fee_less_transaction(chains: Devnet, chain_id: int) -> None:
    mined = await _send(chains, chain_id)  # anvil alone: -32003, tip over the fee cap
    tip, cap = int(mined["maxPriorityFeePerGas"], 16), int(mined["maxFeePerGas"], 16)
    assert tip <= cap < GWEI // 10  # Base-like: a hundredth of a gwei or so
    assert tip >= GWEI // 1000


@pytest.mark.parametrize("chain_id", (80002, 84532))
async def test_a_legacy_transaction_gets_the_networks_gas_price(
    chains: Devnet, chain_id: int
) -> None:
    mined = await _send(chains, chain_id, type="0x0")
    assert mined["type"] == "0x0"
    floor = 5 * GWEI + 25 * GWEI if chain_id == 80002 else GWEI // 200
    assert int(mined["gasPrice"], 16) >= floor


async def test_fees_the_sender_gave_are_kept(chains: Devnet) -> None:
    mined = await _send(chains, 84532, maxPriorityFeePerGas=hex(GWEI // 500))
    assert int(mined["maxPriorityFeePerGas"], 16) == GWEI // 500
    assert int(mined["maxFeePerGas"], 16) > GWEI // 500
    with pytest.raises(RpcError, match="max priority fee per gas higher"):
        # A cap under the network's suggested tip fails as on the real network.
        await _send(chains, 80002, maxFeePerGas=hex(20 * GWEI))
