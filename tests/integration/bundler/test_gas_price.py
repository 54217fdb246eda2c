"""The bundler's fee suggestion on the Polygon and Base stand-ins: an op priced with the
`standard` tier of `pimlico_getUserOperationGasPrice` (what permissionless clients ask a
bundler for) is accepted and included."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.standalone import StandaloneSettings, build_bundler
from entryway.bundler.states import BundlingMode
from entryway.bundler.validation.sanity import check_sanity
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.chain.transactor import Transactor
from entryway.devnet.devnet import Devnet
from tests.integration.bundler.conftest import RpcClient
from tests.integration.harness import ETHER, Harness

BASE_SEPOLIA = 84532


async def _standard_op_is_included(client: RpcClient, harness: Harness) -> None:
    tiers = await client.result("pimlico_getUserOperationGasPrice")
    assert tiers == await client.result("entryway_getUserOperationGasPrice")
    standard = tiers["standard"]
    owner = harness.new_key()
    draft = await harness.build_op(owner.address, b"")
    priced = replace(
        draft,
        max_fee_per_gas=int(standard["maxFeePerGas"], 16),
        max_priority_fee_per_gas=int(standard["maxPriorityFeePerGas"], 16),
    )
    op = harness.sign(harness.sponsor(priced), owner)
    block = await harness.eth.get_block("latest")
    base_fee = int(block["baseFeePerGas"], 16)
    check_sanity(op, base_fee=base_fee, limits=client.rpc.bundler.config.sanity)

    bundler = client.rpc.bundler
    was, bundler.mode = bundler.mode, BundlingMode.AUTO  # the base-fee check applies
    try:
        op_hash = await client.send(op)
        receipt = None
        for _ in range(200):
            receipt = await client.result("eth_getUserOperationReceipt", op_hash)
            if receipt is not None:
                break
            await asyncio.sleep(0.1)
        assert receipt is not None and receipt["success"] is True
    finally:
        bundler.mode = was  # the session's bundler, shared with other files' tests


async def test_a_standard_tier_op_is_included_on_amoy(client: RpcClient, harness: Harness) -> None:
    assert harness.chain_id == 80002
    tiers = await client.result("pimlico_getUserOperationGasPrice")
    assert int(tiers["slow"]["maxPriorityFeePerGas"], 16) >= 25 * 10**9  # Polygon's minimum
    await _standard_op_is_included(client, harness)


@pytest.fixture(scope="module")
async def base_sepolia(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[RpcClient, Harness]]:
    data_dir: Path = tmp_path_factory.mktemp("base-devnet")
    async with (
        Devnet(data_dir, [BASE_SEPOLIA]) as net,
        JsonRpcClient(net.chains[0].rpc_url) as node,
    ):
        eth = EthClient(node)
        executor, funder = Harness.new_key(), Harness.new_key()
        for key in (executor, funder):
            await node.request("anvil_setBalance", [key.address, hex(1000 * ETHER)])
        rpc: BundlerRpc = await build_bundler(
            eth,
            StandaloneSettings(
                rpc_url=net.chains[0].rpc_url,
                entry_point=net.chains[0].deployment.entry_point,
                executor_keys=(executor,),
                debug_rpc=True,
                mode=BundlingMode.AUTO,
            ),
        )
        await rpc.bundler.start()
        harness = Harness(
            eth=eth,
            chain_id=BASE_SEPOLIA,
            deployment=net.chains[0].deployment,
            paymaster_signer=net.keys.paymaster_signer,
            operator=net.keys.operator,
            executor=Transactor(eth, funder, BASE_SEPOLIA),
        )
        try:
            yield RpcClient(rpc, rpc.bundler.config.entry_point), harness
        finally:
            await rpc.bundler.stop()


async def test_a_standard_tier_op_is_included_on_base_sepolia(
    base_sepolia: tuple[RpcClient, Harness],
) -> None:
    client, harness = base_sepolia
    await _standard_op_is_included(client, harness)
