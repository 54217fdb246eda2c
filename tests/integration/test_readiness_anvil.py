"""Readiness and metrics against a real node (anvil): ready while the node serves the chain
and the executor is funded; not ready when a chain's RPC serves another chain id or its
executor key holds nothing. The chain's bundler shows in /metrics."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.standalone import StandaloneSettings, build_bundler
from entryway.bundler.states import BundlingMode
from entryway.chain.rpc import EthClient
from entryway.devnet.devnet import Devnet
from entryway.service.app import create_app
from entryway.service.services import ChainRuntime, Services
from entryway.storage.engine import make_engine, migrate, sqlite_url
from entryway.storage.store import Store
from tests.integration.conftest import CHAIN_ID
from tests.integration.harness import ETHER, Harness

pytestmark = pytest.mark.anvil
OPERATOR_TOKEN = "operator-token-for-readiness"


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    eng = make_engine(sqlite_url(tmp_path))
    await migrate(eng)
    yield eng
    await eng.dispose()


async def bundler_with(devnet: Devnet, eth: EthClient, balance_wei: int) -> BundlerRpc:
    executor = Harness.new_key()
    await eth.rpc.request("anvil_setBalance", [executor.address, hex(balance_wei)])
    chain = devnet.chains[0]
    settings = StandaloneSettings(
        rpc_url=chain.rpc_url,
        entry_point=chain.deployment.entry_point,
        executor_keys=(executor,),
        mode=BundlingMode.MANUAL,
    )
    return await build_bundler(eth, settings)


async def readiness_and_metrics(services: Services) -> tuple[httpx.Response, str]:
    app = create_app(services)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        auth = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
        answer = await http.get("/readyz", headers=auth)
        return answer, (await http.get("/metrics")).text


def services_on(engine: AsyncEngine, *chains: ChainRuntime) -> Services:
    services = Services(admin_token=OPERATOR_TOKEN)
    services.attach(Store(engine))
    services.chains.update({c.chain_id: c for c in chains})
    return services


async def test_ready_on_a_real_node_and_seen_in_metrics(
    devnet: Devnet, eth: EthClient, engine: AsyncEngine
) -> None:
    chain = devnet.chains[0]
    rpc = await bundler_with(devnet, eth, 10 * ETHER)
    runtime = ChainRuntime(CHAIN_ID, chain.rpc_url, chain.deployment, rpc, eth)
    answer, metrics = await readiness_and_metrics(services_on(engine, runtime))

    assert answer.status_code == 200, answer.text
    checks = answer.json()["checks"]
    assert set(checks) == {"database", f"chain.{CHAIN_ID}.rpc", f"chain.{CHAIN_ID}.executors"}
    detail = checks[f"chain.{CHAIN_ID}.rpc"]["detail"]
    assert detail.endswith(f"serves chain {CHAIN_ID}; validation mode opcodes")
    assert f'entryway_mempool_ops{{chain="{CHAIN_ID}"}} 0.0' in metrics
    assert f'entryway_bundles_sent_total{{chain="{CHAIN_ID}"}} 0.0' in metrics
    mode = f'entryway_bundler_validation_mode{{chain="{CHAIN_ID}",mode="opcodes"}} 1.0'
    assert mode in metrics


async def test_not_ready_when_the_rpc_serves_another_chain_or_the_executor_is_broke(
    devnet: Devnet, eth: EthClient, engine: AsyncEngine
) -> None:
    chain = devnet.chains[0]
    funded = await bundler_with(devnet, eth, 10 * ETHER)
    broke = await bundler_with(devnet, eth, 0)
    # Configured as Base Sepolia, but the URL leads to the 80002 devnet.
    misrouted = ChainRuntime(84532, chain.rpc_url, chain.deployment, funded, eth)
    unfunded = ChainRuntime(CHAIN_ID, chain.rpc_url, chain.deployment, broke, eth)
    answer, _ = await readiness_and_metrics(services_on(engine, misrouted, unfunded))

    assert answer.status_code == 503
    assert "Retry-After" in answer.headers
    body = answer.json()
    assert set(body["failing"]) == {"chain.84532.rpc", f"chain.{CHAIN_ID}.executors"}
    assert body["checks"][f"chain.{CHAIN_ID}.rpc"]["ok"] is True
    detail = body["checks"]["chain.84532.rpc"]["detail"]
    assert detail.endswith(f"serves chain {CHAIN_ID}, not 84532")
