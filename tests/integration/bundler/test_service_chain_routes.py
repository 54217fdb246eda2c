"""The service's chain-bound routes on a real devnet: the JSON-RPC endpoint metered per
project, /op-status scoped to the project that sent the op, /account-info reading the chain,
and the seed's "network connection problem" checks (unreachable RPC, wrong chain id,
maintenance)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.rpc_types import user_operation_json
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.devnet.anvil import free_port
from entryway.devnet.devnet import Devnet
from entryway.domain.apikeys import KeyEnvironment
from entryway.domain.plans import PlanName
from entryway.service.app import create_app
from entryway.service.services import ChainRuntime, Services
from entryway.storage.engine import make_engine, migrate, sqlite_url
from entryway.storage.store import Store
from tests.integration.harness import ETHER, Harness

CHAIN = 80002


@pytest.fixture
async def service(
    tmp_path: Path, devnet: Devnet, eth: EthClient, bundler_rpc: BundlerRpc
) -> AsyncIterator[tuple[httpx.AsyncClient, Services]]:
    engine = make_engine(sqlite_url(tmp_path))
    await migrate(engine)
    services = Services()
    services.attach(Store(engine, auth_cache_seconds=0))
    deployment = devnet.chains[0].deployment
    dead = JsonRpcClient(f"http://127.0.0.1:{free_port()}", timeout=1)
    services.chains[CHAIN] = ChainRuntime(CHAIN, "", deployment, bundler_rpc, eth)
    # 84532 served by a node that is down; 8453 by one answering with another chain id.
    services.chains[84532] = ChainRuntime(84532, "", deployment, bundler_rpc, EthClient(dead))
    services.chains[8453] = ChainRuntime(8453, "", deployment, bundler_rpc, eth)
    transport = httpx.ASGITransport(app=create_app(services), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://svc.test") as client:
        yield client, services
    await dead.aclose()
    await engine.dispose()


async def tenant(services: Services, plan: PlanName, chains: list[int]) -> tuple[str, str]:
    now = datetime.now(UTC)
    store = services.store
    owner = await store.create_user(f"{now.timestamp()}@example.org", now)
    pid = await store.create_project(owner, "t", plan, chains, now)
    return pid, (await store.issue_key(pid, KeyEnvironment.TEST, chains, now)).secret


def rpc(method: str, *params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 7, "method": method, "params": list(params)}


async def test_sent_ops_are_charged_to_their_project_and_only_it_sees_their_status(
    service: tuple[httpx.AsyncClient, Services], harness: Harness, bundler_rpc: BundlerRpc
) -> None:
    client, services = service
    pid, key = await tenant(services, PlanName.FREE, [CHAIN])
    auth = {"Authorization": f"Bearer {key}"}
    ep = harness.deployment.entry_point

    owner = harness.new_key()
    sponsored = harness.sign(harness.sponsor(await harness.build_op(owner.address, b"")), owner)
    payer = harness.new_key()
    own_gas = await harness.build_op(payer.address, b"")
    await harness.fund(own_gas.sender, ETHER)
    own_gas = harness.sign(own_gas, payer)

    hashes = []
    for op in (sponsored, own_gas):
        r = await client.post(
            f"/rpc/{CHAIN}",
            headers=auth,
            json=rpc("eth_sendUserOperation", user_operation_json(op), ep),
        )
        assert "result" in r.json(), r.text
        hashes.append(r.json()["result"])
    r = await client.get(
        "/op-status", params={"chainId": CHAIN, "userOpHash": hashes[0]}, headers=auth
    )
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "pending"
    await bundler_rpc.dispatch(rpc("debug_bundler_sendBundleNow"))
    r = await client.get(
        "/v1/op-status", params={"chainId": CHAIN, "userOpHash": hashes[1]}, headers=auth
    )
    assert r.json()["status"] == "included"

    # Our paymaster's op was paid at sponsorship: relaying it is free; the other pays relay.
    prices = services.prices
    relay = prices.validation + prices.relay_per_call
    usage = [
        e
        async for e in services.platform.usage.events(
            pid, datetime(2026, 1, 1, tzinfo=UTC), datetime.now(UTC)
        )
    ]
    assert sorted((e.operation, e.credits, e.subject) for e in usage) == sorted(
        [
            ("relayed_user_operation", 0, sponsored.sender),
            ("relayed_user_operation", relay, own_gas.sender),
        ]
    )
    # Another project's key learns nothing about these ops.
    _, other = await tenant(services, PlanName.FREE, [CHAIN])
    r = await client.get(
        "/op-status",
        params={"chainId": CHAIN, "userOpHash": hashes[0]},
        headers={"Authorization": f"Bearer {other}"},
    )
    assert (r.status_code, r.json()["code"]) == (404, "op_not_found")

    # The deployed account, as the chain sees it.
    r = await client.get(
        "/account-info", params={"chainId": CHAIN, "address": sponsored.sender}, headers=auth
    )
    assert r.status_code == 200, r.text
    info = r.json()
    assert (info["deployed"], info["smartAccount"], info["owner"], info["nonce"]) == (
        True,
        True,
        owner.address,
        1,
    )
    assert (info["guardians"], info["threshold"], info["pendingRecovery"]) == ([], 0, None)
    fresh = harness.new_key().address
    r = await client.get("/account-info", params={"chainId": CHAIN, "address": fresh}, headers=auth)
    assert (r.json()["deployed"], r.json()["smartAccount"], r.json()["deposit"]) == (
        False,
        False,
        "0x0",
    )


async def test_network_connection_problems_list_the_failed_checks(
    service: tuple[httpx.AsyncClient, Services],
) -> None:
    client, services = service
    _, key = await tenant(services, PlanName.PRO, [CHAIN, 84532, 8453])
    auth = {"Authorization": f"Bearer {key}"}

    async def checks(chain_id: int) -> dict[str, bool]:
        r = await client.get("/get-sdk-defaults", params={"chainId": chain_id}, headers=auth)
        assert r.status_code == 503 and r.json()["code"] == "network_connection_problem", r.text
        return {c["check"]: c["passed"] for c in r.json()["checks"]}

    assert await checks(84532) == {
        "rpc_reachable": False,
        "not_under_maintenance": True,
        "chain_id_matches": False,
    }
    assert (await checks(8453))["chain_id_matches"] is False
    services.maintenance.add(CHAIN)
    assert (await checks(CHAIN))["not_under_maintenance"] is False
    services.maintenance.clear()
    r = await client.get("/get-sdk-defaults", params={"chainId": CHAIN}, headers=auth)
    assert r.status_code == 200 and r.json()["chainId"] == CHAIN
    listed = (await client.get("/sdk-defaults", headers=auth)).json()["chains"]
    assert list(listed) == [str(CHAIN)]  # the unhealthy chains are left out
