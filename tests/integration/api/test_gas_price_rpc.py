"""`/rpc/{chainId}` answers the bundler's fee suggestion under both names, counted as a
free read like the other JSON-RPC reads."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.standalone import StandaloneSettings, build_bundler
from entryway.bundler.states import BundlingMode
from entryway.chain.rpc import EthClient
from entryway.devnet.devnet import Devnet
from entryway.service.services import ChainRuntime
from tests.integration.api.conftest import Api
from tests.integration.harness import ETHER, Harness

CHAIN = 80002
GWEI = 10**9


@pytest.fixture
async def served(api: Api, devnet: Devnet, eth: EthClient) -> AsyncIterator[Api]:
    executor = Harness.new_key()
    await eth.rpc.request("anvil_setBalance", [executor.address, hex(10 * ETHER)])
    chain = devnet.chains[0]
    rpc: BundlerRpc = await build_bundler(
        eth,
        StandaloneSettings(
            rpc_url=chain.rpc_url,
            entry_point=chain.deployment.entry_point,
            executor_keys=(executor,),
            mode=BundlingMode.MANUAL,
        ),
    )
    api.services.chains[CHAIN] = ChainRuntime(CHAIN, chain.rpc_url, chain.deployment, rpc, eth)
    yield api


async def test_both_names_answer_tiers_and_are_counted_as_free_reads(served: Api) -> None:
    answers = {}
    for i, method in enumerate(
        ("pimlico_getUserOperationGasPrice", "entryway_getUserOperationGasPrice")
    ):
        call = {"jsonrpc": "2.0", "id": i, "method": method, "params": []}
        r = await served.client.post(f"/rpc/{CHAIN}", headers=served.auth(), json=call)
        assert r.status_code == 200, r.text
        answers[method] = r.json()["result"]
    tiers = answers["pimlico_getUserOperationGasPrice"]
    assert set(tiers) == {"slow", "standard", "fast"}
    assert int(tiers["slow"]["maxPriorityFeePerGas"], 16) >= 25 * GWEI  # Polygon's minimum

    usage = await served.client.get("/v1/usage?groupBy=endpoint", headers=served.auth())
    groups = usage.json()["groups"]
    for method in answers:
        assert groups[f"rpc:{method}"]["requests"] == 1
        assert groups[f"rpc:{method}"]["credits"] == 0


async def test_unknown_methods_are_counted_under_one_name(served: Api) -> None:
    """Each made-up method name is answered -32601 and counted, but all under `rpc:unknown`:
    random names cannot fill the usage table and dashboard with a row each."""
    names = [f"eth_madeUp{i}" for i in range(12)] + ["pm_notAMethod", "x" * 300]
    for i, method in enumerate(names):
        call = {"jsonrpc": "2.0", "id": i, "method": method, "params": []}
        r = await served.client.post(f"/rpc/{CHAIN}", headers=served.auth(), json=call)
        assert r.json()["error"]["code"] == -32601, r.text
    known = {"jsonrpc": "2.0", "id": 99, "method": "eth_chainId", "params": []}
    assert (
        "result"
        in (await served.client.post(f"/rpc/{CHAIN}", headers=served.auth(), json=known)).json()
    )

    usage = await served.client.get("/v1/usage?groupBy=endpoint", headers=served.auth())
    groups = usage.json()["groups"]
    assert groups["rpc:unknown"] == {**groups["rpc:unknown"], "requests": len(names), "credits": 0}
    assert groups["rpc:eth_chainId"]["requests"] == 1
    assert not [g for g in groups if g not in ("rpc:unknown", "rpc:eth_chainId")]
