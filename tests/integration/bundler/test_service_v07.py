"""An EntryPoint v0.7 account served by the service like a v0.8 one: through POST
/rpc/{chainId}, the ERC-7677 paymaster signs with its v0.7 contract, the op is accounted
before it enters the v0.7 mempool, settled from its receipt and reported by /op-status."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.rpc_types import user_operation_json
from entryway.domain.entry_points import V06, V07, V08
from entryway.domain.plans import PlanName
from entryway.paymaster.settlement import SETTLE_TASK, SettleHandler
from entryway.storage.ledger import UsageStatus
from entryway.storage.tasks import TaskQueue
from tests.integration.bundler import test_service_chain_routes as chain_routes
from tests.integration.bundler.test_entry_point_v07 import (
    FACTORY07,
    sign,
    simple_account_op,
)
from tests.integration.bundler.test_rpc_accounting import Client
from tests.integration.bundler.test_service_chain_routes import CHAIN, rpc, tenant
from tests.integration.harness import Harness
from tests.integration.test_erc7677 import with_fields

service = chain_routes.service  # the fixture: a service over the devnet's bundler


async def test_sponsored_v07_op_is_signed_accounted_and_settled(
    service: Client, harness: Harness, bundler_rpc: BundlerRpc
) -> None:
    client, services = service
    pid, key = await tenant(services, PlanName.FREE, [CHAIN])
    auth = {"Authorization": f"Bearer {key}"}
    url = f"/rpc/{CHAIN}"
    paymaster07 = harness.deployment.paymaster_v07
    assert paymaster07 is not None

    op, owner = await simple_account_op(harness, V07.address, FACTORY07)
    # Sponsored: it holds nothing of its own.
    await harness.fund(op.sender, 0)
    draft = replace(op, signature=b"")
    raw = user_operation_json(draft)
    del raw["signature"]
    params = [raw, V07.address, hex(CHAIN), {}]
    stub = await client.post(url, headers=auth, json=rpc("pm_getPaymasterStubData", *params))
    assert stub.json()["result"]["paymaster"] == paymaster07, stub.text
    r = await client.post(url, headers=auth, json=rpc("pm_getPaymasterData", *params))
    assert "result" in r.json(), r.text
    signed = sign(harness, with_fields(draft, r.json()["result"]), V07.address, owner)

    # Sent to v0.8 it is refused (v0.7's paymaster answers to v0.7 only), and charged nothing.
    r = await client.post(
        url,
        headers=auth,
        json=rpc("eth_sendUserOperation", user_operation_json(signed), V08.address),
    )
    assert "error" in r.json(), r.text
    r = await client.post(
        url,
        headers=auth,
        json=rpc("eth_sendUserOperation", user_operation_json(signed), V07.address),
    )
    await settled_and_charged(
        service, bundler_rpc, pid, key, r.json()["result"], V07.address, paymaster07
    )


async def settled_and_charged(
    service: Client,
    bundler_rpc: BundlerRpc,
    pid: str,
    key: str,
    op_hash: str,
    entry_point: str,
    paymaster: str,
) -> None:
    """The sponsored op `op_hash`, just accepted on `/rpc/{CHAIN}`, is bundled, settled from
    its receipt (`paymaster`'s, at `entry_point`), charged in credits and reported included."""
    client, services = service
    auth = {"Authorization": f"Bearer {key}"}
    url = f"/rpc/{CHAIN}"
    later = TaskQueue(services.store.engine, clock=lambda: datetime.now(UTC) + timedelta(1))
    (task,) = await later.claim("test", [SETTLE_TASK], lease_seconds=30)
    assert task.payload["userOpHash"] == op_hash
    await bundler_rpc.dispatch(rpc("debug_bundler_sendBundleNow"))
    assert services.settler is not None
    assert await SettleHandler(services.settler)(task) == {"settled": op_hash}

    receipt = (
        await client.post(url, headers=auth, json=rpc("eth_getUserOperationReceipt", op_hash))
    ).json()["result"]
    assert receipt["success"] is True and receipt["entryPoint"] == entry_point
    assert receipt["paymaster"] == paymaster
    events = {
        e.operation: e
        async for e in services.platform.usage.events(
            pid, datetime(2026, 1, 1, tzinfo=UTC), datetime.now(UTC)
        )
    }
    sponsorship = events["sponsored_user_operation"]
    assert sponsorship.status == UsageStatus.SETTLED and sponsorship.credits > 0
    assert events["relayed_user_operation"].credits == 0
    balance = (await services.store.credit_account(pid)).balance(datetime.now(UTC))
    assert balance == 1_000_000 - sponsorship.credits
    status = {"chainId": CHAIN, "userOpHash": op_hash}
    r = await client.get("/op-status", params=status, headers=auth)
    assert r.json()["status"] == "included"
    assert r.json()["credits"] == sponsorship.credits


async def test_paymaster_lists_every_entry_point_when_refusing_another(
    service: Client, harness: Harness
) -> None:
    client, services = service
    _, key = await tenant(services, PlanName.FREE, [CHAIN])
    op, _ = await simple_account_op(harness, V07.address, FACTORY07)
    raw = user_operation_json(op)
    del raw["signature"]
    stranger = "0x" + "11" * 20
    r = await client.post(
        f"/rpc/{CHAIN}",
        headers={"Authorization": f"Bearer {key}"},
        json=rpc("pm_getPaymasterStubData", raw, stranger, hex(CHAIN), {}),
    )
    error = r.json()["error"]
    assert error["code"] == -32602
    assert error["data"]["supportedEntryPoints"] == [
        V08.address,
        V07.address,
        harness.deployment.entry_point_v09,
        V06.address,
    ]


@pytest.fixture(autouse=True)
def _fresh(bundler_rpc: BundlerRpc) -> None:
    for bundler in bundler_rpc.bundlers:
        bundler.clear()


async def test_sdk_defaults_name_the_v07_contracts(service: Client, harness: Harness) -> None:
    client, services = service
    _, key = await tenant(services, PlanName.FREE, [CHAIN])
    r = await client.get(
        "/get-sdk-defaults", params={"chainId": CHAIN}, headers={"Authorization": f"Bearer {key}"}
    )
    body = r.json()
    assert body["entryPoint"] == V08.address and body["entryPointV07"] == V07.address
    assert body["paymasterV07"] == harness.deployment.paymaster_v07
    assert body["simpleAccountFactoryV07"] == harness.deployment.simple_account_factory_v07
