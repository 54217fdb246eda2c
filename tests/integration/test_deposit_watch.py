"""Every paymaster's deposit watched on a real node (anvil), each at its own EntryPoint: a low
v0.7 deposit sends `paymaster.deposit_low` naming the v0.7 paymaster and its EntryPoint while
v0.8's, above the threshold, sends nothing; the operator route, /metrics and /readyz show
both paymasters."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.chain.rpc import EthClient
from entryway.chain.transactor import Transactor
from entryway.composition.events import deposit_events
from entryway.devnet.devnet import Devnet
from entryway.domain.destinations import PRIVATE_ALLOWED
from entryway.domain.evm import checksum
from entryway.domain.plans import PlanName
from entryway.domain.webhooks import EventType
from entryway.paymaster.deposit import DepositWatcher, read_deposit, top_up
from entryway.paymaster.erc7677 import PaymasterChain, PaymasterRpc
from entryway.paymaster.signer import PaymasterSigner
from entryway.service.app import create_app
from entryway.service.services import ChainRuntime, Services
from entryway.storage.policies import PolicyStore, SqlSponsorshipUsage
from entryway.storage.schema import webhook_events
from entryway.storage.store import Store
from entryway.storage.webhooks import WebhookStore
from tests.integration import test_readiness_anvil as readiness
from tests.integration.conftest import CHAIN_ID
from tests.integration.harness import ETHER, Harness
from tests.integration.test_readiness_anvil import bundler_with
from tests.integration.webhooks.support import SECRETS

pytestmark = pytest.mark.anvil
OPERATOR_TOKEN = "operator-token-for-deposits"
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}


engine = readiness.engine  # the fixture: a migrated SQLite database


async def sponsoring_services(devnet: Devnet, eth: EthClient, engine: AsyncEngine) -> Services:
    """The service on the devnet chain with its paymaster on both EntryPoints, as the
    composition root builds it."""
    services = Services(admin_token=OPERATOR_TOKEN)
    store = Store(engine)
    services.attach(store)
    chain = devnet.chains[0]
    d = chain.deployment
    rpc = await bundler_with(devnet, eth, 10 * ETHER)
    services.chains[CHAIN_ID] = ChainRuntime(CHAIN_ID, chain.rpc_url, d, rpc, eth)
    services.paymaster = PaymasterRpc(
        {
            CHAIN_ID: PaymasterChain.on(
                eth, CHAIN_ID, d.entry_point, d.paymaster, also=d.other_paymasters()
            )
        },
        PaymasterSigner(devnet.keys.paymaster_signer),
        PolicyStore(engine),
        SqlSponsorshipUsage(engine),
        store.ledger,
        services.prices,
    )
    return services


async def deposit_events_of(engine: AsyncEngine, project_id: str) -> list[dict[str, Any]]:
    async with engine.connect() as db:
        rows = await db.execute(
            select(webhook_events.c.body).where(
                webhook_events.c.project_id == project_id,
                webhook_events.c.event_type == EventType.PAYMASTER_DEPOSIT_LOW.value,
            )
        )
        return [json.loads(body)["data"] for (body,) in rows]


async def test_a_low_v07_deposit_alerts_naming_its_paymaster_and_both_are_shown(
    devnet: Devnet, eth: EthClient, harness: Harness, engine: AsyncEngine
) -> None:
    d = devnet.chains[0].deployment
    assert d.entry_point_v07 is not None and d.paymaster_v07 is not None
    ep07, pm07 = checksum(d.entry_point_v07), checksum(d.paymaster_v07)
    ep08, pm08 = checksum(d.entry_point), checksum(d.paymaster)
    assert d.entry_point_v09 is not None and d.paymaster_v09 is not None
    ep09, pm09 = checksum(d.entry_point_v09), checksum(d.paymaster_v09)
    assert d.entry_point_v06 is not None and d.paymaster_v06 is not None
    ep06, pm06 = checksum(d.entry_point_v06), checksum(d.paymaster_v06)
    v07 = await read_deposit(eth, ep07, pm07)
    # v0.8's, v0.9's and v0.6's well above v0.7's: a threshold between them
    for ep, pm in ((ep08, pm08), (ep09, pm09), (ep06, pm06)):
        held = await read_deposit(eth, ep, pm)
        if held < v07 + 2 * ETHER:
            funder = harness.new_key()
            await harness.fund(funder.address, v07 + 10 * ETHER)
            await top_up(Transactor(eth, funder, CHAIN_ID), ep, pm, v07 + 2 * ETHER - held)
    v08 = await read_deposit(eth, ep08, pm08)
    v09 = await read_deposit(eth, ep09, pm09)
    v06 = await read_deposit(eth, ep06, pm06)
    threshold = v07 + ETHER

    services = await sponsoring_services(devnet, eth, engine)
    now = datetime.now(UTC)
    owner = await services.store.create_user(f"{now.timestamp()}@example.org", now)
    project = await services.store.create_project(owner, "ops", PlanName.FREE, [CHAIN_ID], now)
    hooks = WebhookStore(engine, destinations=PRIVATE_ALLOWED, secrets=SECRETS)
    await hooks.create_endpoint(project, "http://127.0.0.1:9/hooks", ["paymaster.deposit_low"])

    # A watcher per paymaster, as the composition root starts them.
    alert = deposit_events(services.store, WebhookStore(engine))
    watched = services.paymaster_contracts(CHAIN_ID)
    assert {checksum(ep): checksum(pm) for ep, pm in watched.items()} == {
        ep08: pm08,
        ep07: pm07,
        ep09: pm09,
        ep06: pm06,
    }
    for entry_point, paymaster in watched.items():
        watcher = DepositWatcher(eth, CHAIN_ID, entry_point, paymaster, threshold, alert)
        services.record_deposit(await watcher.check())

    assert await deposit_events_of(engine, project) == [
        {
            "chainId": CHAIN_ID,
            "entryPoint": ep07,
            "paymaster": pm07,
            "depositWei": str(v07),
            "thresholdWei": str(threshold),
        }
    ]

    transport = httpx.ASGITransport(app=create_app(services))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
        listed = (await http.get("/v1/admin/paymaster", headers=OPERATOR)).json()["deposits"]
        metrics = (await http.get("/metrics")).text
        ready = await http.get("/readyz", headers=OPERATOR)

    assert [
        (x["chainId"], x["entryPointVersion"], x["entryPoint"], x["paymaster"], x["low"])
        for x in listed
    ] == [
        (CHAIN_ID, "0.8", ep08, pm08, False),
        (CHAIN_ID, "0.7", ep07, pm07, True),
        (CHAIN_ID, "0.9", ep09, pm09, False),
        (CHAIN_ID, "0.6", ep06, pm06, False),
    ]
    assert [x["depositWei"] for x in listed] == [str(v08), str(v07), str(v09), str(v06)]

    gauges = {
        (s.labels["chain"], s.labels["entry_point"], s.labels["paymaster"]): s.value
        for family in text_string_to_metric_families(metrics)
        if family.name == "entryway_paymaster_deposit_wei"
        for s in family.samples
    }
    assert gauges == {
        (str(CHAIN_ID), ep08, pm08): float(v08),
        (str(CHAIN_ID), ep07, pm07): float(v07),
        (str(CHAIN_ID), ep09, pm09): float(v09),
        (str(CHAIN_ID), ep06, pm06): float(v06),
    }

    check = f"chain.{CHAIN_ID}.paymaster_deposit"
    assert ready.status_code == 503 and ready.json()["failing"] == [check]
    detail = ready.json()["checks"][check]["detail"]
    assert detail == f"v0.7 paymaster {pm07}: {v07} wei, under {threshold} wei"
