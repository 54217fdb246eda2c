"""A self-funded EntryPoint v0.6 op through the service's POST /rpc/{chainId}, in v0.6's own
shape: accepted under the project's key, bundled, its receipt and its v0.6 body read back
through the same route, and reported included by /op-status."""

from __future__ import annotations

from entryway.bundler.rpc_methods import BundlerRpc
from entryway.domain.entry_points import V06
from entryway.domain.plans import PlanName
from entryway.domain.userop_v06 import op_v06_to_json, user_op_hash_v06
from tests.integration.bundler import test_service_chain_routes as chain_routes
from tests.integration.bundler.test_rpc_accounting import Client
from tests.integration.bundler.test_service_chain_routes import CHAIN, rpc, tenant
from tests.integration.harness import Harness
from tests.integration.v06_ops import first_op

service = chain_routes.service  # the fixture: a service over the devnet's bundler


async def test_a_v06_op_goes_through_the_chain_route(
    service: Client, harness: Harness, bundler_rpc: BundlerRpc
) -> None:
    client, services = service
    _, key = await tenant(services, PlanName.FREE, [CHAIN])
    auth = {"Authorization": f"Bearer {key}"}
    url = f"/rpc/{CHAIN}"
    supported = await client.post(url, headers=auth, json=rpc("eth_supportedEntryPoints"))
    assert V06.address in supported.json()["result"]
    op, _ = await first_op(harness)
    r = await client.post(
        url, headers=auth, json=rpc("eth_sendUserOperation", op_v06_to_json(op), V06.address)
    )
    op_hash = r.json()["result"]
    assert op_hash == "0x" + user_op_hash_v06(op, V06.address, harness.chain_id).hex(), r.text
    await bundler_rpc.dispatch(rpc("debug_bundler_sendBundleNow"))
    receipt = (
        await client.post(url, headers=auth, json=rpc("eth_getUserOperationReceipt", op_hash))
    ).json()["result"]
    assert receipt["success"] is True and receipt["entryPoint"] == V06.address
    found = (
        await client.post(url, headers=auth, json=rpc("eth_getUserOperationByHash", op_hash))
    ).json()["result"]
    assert found["userOperation"] == op_v06_to_json(op)
    r = await client.get(
        "/op-status", params={"chainId": CHAIN, "userOpHash": op_hash}, headers=auth
    )
    assert r.json()["status"] == "included", r.text
