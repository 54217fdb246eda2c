"""Charges made outside the meter reach the credits metric too: an op relayed through
/rpc/{chainId} and a sponsored op's settlement show in `entryway_credits_charged_total`,
the settlement once however often its task runs (a real devnet, the service's routes)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
from prometheus_client.parser import text_string_to_metric_families

from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.rpc_types import user_operation_json
from entryway.domain.plans import PlanName
from entryway.domain.signatures import sign_digest
from entryway.domain.userop import user_op_hash
from entryway.paymaster.settlement import SETTLE_TASK, SettleHandler, SponsorshipSettler
from entryway.service.services import Services
from entryway.service.wallet_wiring import bundler_port
from entryway.storage.tasks import TaskQueue
from tests.integration.bundler.test_service_chain_routes import (  # noqa: F401 - fixture
    CHAIN,
    rpc,
    service,
    tenant,
)
from tests.integration.harness import ETHER, Harness
from tests.integration.test_erc7677 import with_fields


async def credits_charged(client: httpx.AsyncClient) -> dict[str, float]:
    scraped = await client.get("/metrics")  # the test transport's client is loopback
    assert scraped.status_code == 200, scraped.text
    return {
        s.labels["operation"]: s.value
        for family in text_string_to_metric_families(scraped.text)
        if family.name == "entryway_credits_charged"
        for s in family.samples
    }


async def test_relayed_and_settled_ops_are_counted_once(
    service: tuple[httpx.AsyncClient, Services],  # noqa: F811
    harness: Harness,
    bundler_rpc: BundlerRpc,
) -> None:
    client, services = service
    meter = services.platform.meter
    # As the composition root wires it: settlements report to the meter's count.
    settler = SponsorshipSettler(
        services.store.ledger,
        services.prices,
        {CHAIN: bundler_port(services.chains[CHAIN])},
        counted=meter.counted,
    )
    _, key = await tenant(services, PlanName.FREE, [CHAIN])
    auth = {"Authorization": f"Bearer {key}"}
    ep = harness.deployment.entry_point
    url = f"/rpc/{CHAIN}"

    payer = harness.new_key()
    own_gas = await harness.build_op(payer.address, b"")
    await harness.fund(own_gas.sender, ETHER)
    own_gas = harness.sign(own_gas, payer)
    send = rpc("eth_sendUserOperation", user_operation_json(own_gas), ep)
    assert "result" in (await client.post(url, headers=auth, json=send)).json()
    # It deploys its account: the relay and the account creation, counted as the latter.
    prices = services.prices
    relay = prices.validation + prices.relay_per_call + prices.account_creation
    assert (await credits_charged(client)).get("account_creation") == relay

    owner = harness.new_key()
    draft = await harness.build_op(owner.address, b"")
    raw = user_operation_json(draft)
    del raw["signature"]
    signed = await client.post(
        url, headers=auth, json=rpc("pm_getPaymasterData", raw, ep, hex(CHAIN), {})
    )
    op = with_fields(draft, signed.json()["result"])
    op = op.with_signature(sign_digest(bytes(owner.key), user_op_hash(op, ep, CHAIN)))
    sent = await client.post(
        url, headers=auth, json=rpc("eth_sendUserOperation", user_operation_json(op), ep)
    )
    op_hash = sent.json()["result"]
    assert "sponsored_user_operation" not in await credits_charged(client)  # held, not charged
    await bundler_rpc.dispatch(rpc("debug_bundler_sendBundleNow"))
    later = TaskQueue(services.store.engine, clock=lambda: datetime.now(UTC) + timedelta(1))
    (task,) = await later.claim("test", [SETTLE_TASK], lease_seconds=30)
    handler = SettleHandler(settler)
    for _ in range(2):  # a task run again settles nothing more
        assert await handler(task) == {"settled": op_hash}
    r = await client.get(
        "/op-status", params={"chainId": CHAIN, "userOpHash": op_hash}, headers=auth
    )
    settled = r.json()["credits"]
    assert settled > 0
    counted = await credits_charged(client)
    assert counted["sponsored_user_operation"] == settled
    assert counted["account_creation"] == relay
    assert counted.get("relayed_user_operation", 0) == 0  # relaying a sponsored op is free
