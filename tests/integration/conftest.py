"""Integration tier: a real anvil (from npm), started once per session with every contract
deployed by the same code `entryway devnet` runs, and stopped at the end."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.chain.transactor import Transactor
from entryway.devnet.devnet import Devnet
from tests.integration.harness import ETHER, Harness

CHAIN_ID = 80002


@pytest.fixture(scope="session")
async def devnet(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Devnet]:
    data_dir: Path = tmp_path_factory.mktemp("devnet")
    async with Devnet(data_dir, [CHAIN_ID]) as net:
        yield net


@pytest.fixture(scope="session")
async def eth(devnet: Devnet) -> AsyncIterator[EthClient]:
    async with JsonRpcClient(devnet.chains[0].rpc_url) as rpc:
        yield EthClient(rpc)


@pytest.fixture(scope="session")
async def harness(devnet: Devnet, eth: EthClient) -> Harness:
    executor_key = Harness.new_key()
    await eth.rpc.request("anvil_setBalance", [executor_key.address, hex(1000 * ETHER)])
    return Harness(
        eth=eth,
        chain_id=CHAIN_ID,
        deployment=devnet.chains[0].deployment,
        paymaster_signer=devnet.keys.paymaster_signer,
        operator=devnet.keys.operator,
        executor=Transactor(eth, executor_key, CHAIN_ID),
    )
