"""`GET /v1/ops/{userOpHash}` on a real devnet: an op's lifecycle with times, its calls
decoded, gas given against used, credits, a failed execution's revert in words, links to
the chain's explorer (a devnet's: its local node), and nothing for another project."""

from __future__ import annotations

from dataclasses import replace

import httpx

from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.rpc_types import user_operation_json
from entryway.devnet.devnet import Devnet
from entryway.domain.plans import PlanName
from entryway.service.services import Services
from tests.integration.bundler.test_service_chain_routes import (  # noqa: F401 (fixture)
    CHAIN,
    rpc,
    service,
    tenant,
)
from tests.integration.harness import ACCOUNT, COUNTER, ETHER, Harness, self_call


async def _send(client: httpx.AsyncClient, key: str, harness: Harness, op: object) -> str:
    r = await client.post(
        f"/rpc/{CHAIN}",
        headers={"Authorization": f"Bearer {key}"},
        json=rpc("eth_sendUserOperation", user_operation_json(op), harness.deployment.entry_point),  # type: ignore[arg-type]
    )
    assert "result" in r.json(), r.text
    return str(r.json()["result"])


async def test_an_ops_page_follows_it_from_receipt_to_inclusion_with_its_calls_and_gas(
    service: tuple[httpx.AsyncClient, Services],  # noqa: F811
    harness: Harness,
    bundler_rpc: BundlerRpc,
    devnet: Devnet,
) -> None:
    client, services = service
    _, key = await tenant(services, PlanName.FREE, [CHAIN])
    auth = {"Authorization": f"Bearer {key}"}
    owner = harness.new_key()
    target = "0x" + "12" * 20
    call = COUNTER.encode_call("count")
    op = await harness.build_op(owner.address, ACCOUNT.encode_call("execute", target, 5, call))
    await harness.fund(op.sender, ETHER)
    op_hash = await _send(client, key, harness, harness.sign(op, owner))

    r = await client.get(f"/v1/ops/{op_hash}", headers=auth)
    assert r.status_code == 200, r.text
    page = r.json()
    assert page["status"] == "pending"
    assert [s["step"] for s in page["lifecycle"]] == ["received", "validated", "queued"]
    assert page["lifecycle"][0]["at"] is not None
    fields = page["fields"]
    assert (fields["sender"], fields["paymaster"], fields["factory"]) == (
        op.sender,
        None,
        harness.deployment.account_factory,
    )
    assert fields["calls"] == [
        {
            "target": "0x1212121212121212121212121212121212121212",
            "value": "5",
            "selector": "0x" + COUNTER.selector("count").hex(),
            "dataLength": 4,
        }
    ]
    assert page["gas"]["used"] is None
    assert page["gas"]["estimated"] == str(300_000 + 600_000 + 60_000)

    await bundler_rpc.dispatch(rpc("debug_bundler_sendBundleNow"))
    page = (await client.get(f"/v1/ops/{op_hash}", headers=auth)).json()
    assert page["status"] == "included"
    steps = {s["step"]: s for s in page["lifecycle"]}
    assert list(steps) == ["received", "validated", "queued", "submitted", "included", "settled"]
    assert steps["settled"]["credits"] == page["credits"]["total"]
    tx_hash = page["transactionHash"]
    assert steps["submitted"]["transactionHash"] == tx_hash
    receipt = await harness.eth.rpc.request("eth_getTransactionReceipt", [tx_hash])
    assert steps["included"]["block"] == int(receipt["blockNumber"], 16)
    assert steps["included"]["at"] is not None and steps["included"]["success"] is True
    assert steps["included"]["confirmations"] >= 1
    used = int(page["gas"]["used"])
    assert 0 < used <= int(page["gas"]["estimated"])
    assert page["revert"] is None
    assert page["credits"]["total"] == sum(c["credits"] for c in page["credits"]["charges"])
    assert page["credits"]["total"] > 0
    # The chain is served as Amoy: links to its public explorer.
    assert page["links"]["kind"] == "explorer"
    assert page["links"]["transaction"] == f"https://amoy.polygonscan.com/tx/{tx_hash}"

    # Served from a node on this machine (a devnet), the op links to that node instead.
    local = devnet.chains[0].rpc_url
    services.chains[CHAIN] = replace(services.chains[CHAIN], rpc_url=local)
    links = (await client.get(f"/v1/ops/{op_hash}", headers=auth)).json()["links"]
    assert links == {"kind": "node", "node": local, "transaction": None, "sender": None}

    # Another project's key, or a hash never sent, finds nothing.
    _, other = await tenant(services, PlanName.FREE, [CHAIN])
    r = await client.get(f"/v1/ops/{op_hash}", headers={"Authorization": f"Bearer {other}"})
    assert (r.status_code, r.json()["code"]) == (404, "op_not_found")
    r = await client.get(f"/v1/ops/0x{'00' * 32}", headers=auth)
    assert (r.status_code, r.json()["code"]) == (404, "op_not_found")
    r = await client.get("/v1/ops/0x1234", headers=auth)
    assert r.status_code == 422


async def test_a_reverted_ops_page_shows_the_decoded_revert(
    service: tuple[httpx.AsyncClient, Services],  # noqa: F811
    harness: Harness,
    bundler_rpc: BundlerRpc,
) -> None:
    client, services = service
    _, key = await tenant(services, PlanName.FREE, [CHAIN])
    owner = harness.new_key()
    # The account calls itself to cancel a recovery that was never started.
    probe = await harness.build_op(owner.address, b"")
    op = await harness.build_op(
        owner.address, self_call(probe.sender, ACCOUNT.encode_call("cancelRecovery"))
    )
    await harness.fund(op.sender, ETHER)
    op_hash = await _send(client, key, harness, harness.sign(op, owner))
    await bundler_rpc.dispatch(rpc("debug_bundler_sendBundleNow"))

    r = await client.get(f"/v1/ops/{op_hash}", headers={"Authorization": f"Bearer {key}"})
    page = r.json()
    assert page["status"] == "failed", r.text
    included = next(s for s in page["lifecycle"] if s["step"] == "included")
    assert included["success"] is False
    assert page["revert"]["kind"] == "custom"
    assert page["revert"]["message"].endswith("NoPendingRecovery()")
    assert page["fields"]["calls"][0]["selector"] == "0x" + ACCOUNT.selector("cancelRecovery").hex()
