"""Wallet operations in ops that pay their own gas, on a real devnet through the service's
routes: a deploy and then a guardian change are each charged the relay plus their wallet fees
(docs/pricing.md), and show as their operation type in /v1/usage and its export."""

from __future__ import annotations

import csv
import io

import httpx
from eth_abi.abi import encode

from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.rpc_types import user_operation_json
from entryway.domain.plans import PlanName
from entryway.domain.userop import UserOperation
from entryway.domain.wallet_ops import ADD_GUARDIAN
from entryway.paymaster.calls import encode_execute
from entryway.service.services import Services
from tests.integration.bundler.test_service_chain_routes import (  # noqa: F401 - fixture
    CHAIN,
    rpc,
    service,
    tenant,
)
from tests.integration.harness import ACCOUNT, ETHER, Harness


async def included(
    client: httpx.AsyncClient, auth: dict[str, str], harness: Harness, bundler_rpc: BundlerRpc,
    op: UserOperation,
) -> None:  # fmt: skip
    """Send `op` through /rpc/{chainId}, bundle it, and see it included."""
    ep = harness.deployment.entry_point
    sent = await client.post(
        f"/rpc/{CHAIN}",
        headers=auth,
        json=rpc("eth_sendUserOperation", user_operation_json(op), ep),
    )
    assert "result" in sent.json(), sent.text
    await bundler_rpc.dispatch(rpc("debug_bundler_sendBundleNow"))
    params = {"chainId": CHAIN, "userOpHash": sent.json()["result"]}
    r = await client.get("/v1/op-status", params=params, headers=auth)
    assert r.json()["status"] == "included", r.text


async def test_self_paid_deploy_and_guardian_change_pay_their_wallet_fees(
    service: tuple[httpx.AsyncClient, Services],  # noqa: F811
    harness: Harness,
    bundler_rpc: BundlerRpc,
) -> None:
    client, services = service
    _, key = await tenant(services, PlanName.FREE, [CHAIN])
    auth = {"Authorization": f"Bearer {key}"}
    prices = services.prices
    relay = prices.validation + prices.relay_per_call  # + 1 credit per calldata byte

    owner = harness.new_key()
    deploy = await harness.build_op(owner.address, b"")
    assert deploy.factory is not None
    await harness.fund(deploy.sender, ETHER)
    await included(client, auth, harness, bundler_rpc, harness.sign(deploy, owner))

    guardian = harness.new_key().address
    add = encode_execute(deploy.sender, 0, ADD_GUARDIAN + encode(["address"], [guardian]))
    change = await harness.build_op(owner.address, add)
    assert change.factory is None  # deployed: a guardian change alone
    await included(client, auth, harness, bundler_rpc, harness.sign(change, owner))
    assert await harness.call(deploy.sender, ACCOUNT, "isGuardian", guardian)

    deploy_credits = relay + prices.account_creation
    change_credits = relay + len(add) + prices.guardian_change + prices.per_verification_step
    assert (deploy_credits, change_credits - len(add)) == (1_300, 1_050)  # docs/pricing.md
    r = await client.get("/v1/usage", params={"groupBy": "operation"}, headers=auth)
    groups = r.json()["groups"]
    assert groups["account_creation"] == {"credits": deploy_credits, "operations": 1, "requests": 0}
    assert groups["guardian_management"] == {
        "credits": change_credits, "operations": 1, "requests": 0
    }  # fmt: skip
    assert "relayed_user_operation" not in groups
    assert r.json()["totalCredits"] == deploy_credits + change_credits

    r = await client.get("/v1/usage/export", params={"format": "csv"}, headers=auth)
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert [(e["operation"], int(e["credits"])) for e in rows] == [
        ("account_creation", deploy_credits),
        ("guardian_management", change_credits),
    ]
