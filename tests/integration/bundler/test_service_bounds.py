"""Bounds where an op enters the service, on a real devnet (Amoy's fee rules) and a real
ledger (SQLite): fees past the chain's ceiling are refused with -32602 by the paymaster and the
bundler alike and hold nothing; a paymaster gas limit past the documented maximum is refused,
not lowered; a hold the project cannot cover (its credits plus its plan's overage ceiling) is
refused with -32501 `overage_ceiling`; /v1/credits and the alerts answer all along."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.rpc_types import user_operation_json
from entryway.chain.rpc import EthClient
from entryway.devnet.devnet import Devnet
from entryway.domain.apikeys import KeyEnvironment
from entryway.domain.networks import GWEI
from entryway.domain.plans import PlanName
from entryway.domain.signatures import sign_digest
from entryway.domain.userop import UserOperation, user_op_hash
from entryway.paymaster.erc7677 import PaymasterChain, PaymasterRpc
from entryway.paymaster.signer import PaymasterSigner
from entryway.service.app import create_app
from entryway.service.services import ChainRuntime, Services
from entryway.storage.engine import make_engine, migrate, sqlite_url
from entryway.storage.policies import PolicyStore, SqlSponsorshipUsage
from entryway.storage.store import Store
from tests.integration.harness import Harness

CHAIN = 80002
AMOY_FEE_CEILING = 50_000 * GWEI
Service = tuple[httpx.AsyncClient, Services]


@pytest.fixture
async def service(
    tmp_path: Path, devnet: Devnet, eth: EthClient, bundler_rpc: BundlerRpc
) -> AsyncIterator[Service]:
    engine = make_engine(sqlite_url(tmp_path))
    await migrate(engine)
    services = Services()
    platform = services.attach(Store(engine, auth_cache_seconds=0))
    deployment = devnet.chains[0].deployment
    services.chains[CHAIN] = ChainRuntime(CHAIN, "", deployment, bundler_rpc, eth)
    services.paymaster = PaymasterRpc(
        {CHAIN: PaymasterChain.on(eth, CHAIN, deployment.entry_point, deployment.paymaster)},
        PaymasterSigner(devnet.keys.paymaster_signer),
        PolicyStore(engine),
        SqlSponsorshipUsage(engine),
        services.store.ledger,
        services.prices,
        on_hold=platform.meter.alerts_may_be_due,
    )
    transport = httpx.ASGITransport(app=create_app(services), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://svc.test") as client:
        yield client, services
    await engine.dispose()


async def tenant(services: Services) -> tuple[str, dict[str, str]]:
    """A FREE project (1,000,000 credits a month, an overage ceiling of 10,000,000)."""
    now = datetime.now(UTC)
    store = services.store
    owner = await store.create_user(f"{now.timestamp()}@example.org", now)
    pid = await store.create_project(owner, "t", PlanName.FREE, [CHAIN], now)
    key = await store.issue_key(pid, KeyEnvironment.TEST, [CHAIN], now)
    return pid, {"Authorization": f"Bearer {key.secret}"}


def unsigned(op: UserOperation, **extra: str) -> dict[str, Any]:
    raw = user_operation_json(op)
    del raw["signature"]
    return raw | extra


async def call(client: httpx.AsyncClient, auth: dict[str, str], method: str, *params: Any) -> Any:
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": list(params)}
    r = await client.post(f"/rpc/{CHAIN}", headers=auth, json=body)
    assert r.status_code == 200, r.text
    return r.json()


async def credits(client: httpx.AsyncClient, auth: dict[str, str]) -> dict[str, Any]:
    r = await client.get("/v1/credits", headers=auth)
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


@pytest.mark.parametrize("fee", [2**64, 2**128 - 1])
async def test_a_fee_past_the_chain_ceiling_is_refused_wherever_the_op_enters(
    service: Service, harness: Harness, fee: int
) -> None:
    client, _ = service
    _, auth = await tenant(service[1])
    ep = harness.deployment.entry_point
    owner = harness.new_key()
    op = replace(await harness.build_op(owner.address, b""), max_fee_per_gas=fee)
    expected = f"maxFeePerGas {fee} is above this chain's ceiling of {AMOY_FEE_CEILING} wei"
    for method in ("pm_getPaymasterStubData", "pm_getPaymasterData"):
        answer = await call(client, auth, method, unsigned(op), ep, hex(CHAIN), {})
        assert answer["error"]["code"] == -32602 and answer["error"]["message"] == expected
    signed = op.with_signature(sign_digest(bytes(owner.key), user_op_hash(op, ep, CHAIN)))
    for method in ("eth_estimateUserOperationGas", "eth_sendUserOperation"):
        answer = await call(client, auth, method, user_operation_json(signed), ep)
        assert answer["error"]["code"] == -32602 and answer["error"]["message"] == expected
    after = await credits(client, auth)  # nothing held, nothing charged
    assert (after["balance"], after["usedThisCycle"], after["overageThisCycle"]) == (
        1_000_000,
        0,
        0,
    )


async def test_a_paymaster_gas_limit_past_the_maximum_is_refused_not_lowered(
    service: Service, harness: Harness
) -> None:
    client, _ = service
    _, auth = await tenant(service[1])
    ep = harness.deployment.entry_point
    op = await harness.build_op(harness.new_key().address, b"")
    too_much = {"paymasterVerificationGasLimit": hex(500_001)}
    named = {**too_much, "paymaster": harness.deployment.paymaster}
    for extra in (too_much, named):
        for method in ("pm_getPaymasterStubData", "pm_getPaymasterData"):
            answer = await call(client, auth, method, unsigned(op, **extra), ep, hex(CHAIN), {})
            error = answer["error"]
            assert error["code"] == -32602
            assert error["message"] == (
                "paymasterVerificationGasLimit 500001 is above this paymaster's maximum of 500000"
            )
    assert (await credits(client, auth))["usedThisCycle"] == 0
    most = unsigned(op, paymasterVerificationGasLimit=hex(500_000))
    answer = await call(client, auth, "pm_getPaymasterData", most, ep, hex(CHAIN), {})
    assert answer["result"]["paymasterVerificationGasLimit"] == hex(500_000)  # signed as sent


async def test_a_hold_past_the_credits_and_the_overage_ceiling_is_refused(
    service: Service, harness: Harness
) -> None:
    client, services = service
    _, auth = await tenant(services)
    ep = harness.deployment.entry_point
    # Dear but within Amoy's bounds: 40,000 gwei a gas is 8 credits at 0.20 EUR a POL.
    dear = {"max_fee_per_gas": 40_000 * GWEI, "max_priority_fee_per_gas": 30 * GWEI}
    draft = replace(await harness.build_op(harness.new_key().address, b""), **dear)

    huge = replace(draft, call_gas_limit=2_000_000)  # ~21.8M credits: past 1M + 10M
    answer = await call(client, auth, "pm_getPaymasterData", unsigned(huge), ep, hex(CHAIN), {})
    assert answer["error"]["code"] == -32501
    assert answer["error"]["data"] == {"rule": "overage_ceiling", "policyId": None}
    assert (await credits(client, auth))["usedThisCycle"] == 0  # nothing held

    answer = await call(client, auth, "pm_getPaymasterData", unsigned(draft), ep, hex(CHAIN), {})
    assert "result" in answer, answer  # ~8.2M credits: the 1M left, then overage
    first = await credits(client, auth)
    held = first["usedThisCycle"]
    assert 1_000_000 < held <= 11_000_000
    assert (first["balance"], first["overageThisCycle"]) == (0, held - 1_000_000)

    # The same op again is the same hold; the next one would take overage past 10M.
    again = await call(client, auth, "pm_getPaymasterData", unsigned(draft), ep, hex(CHAIN), {})
    assert "result" in again
    nxt = unsigned(replace(draft, nonce=draft.nonce + 1))
    answer = await call(client, auth, "pm_getPaymasterData", nxt, ep, hex(CHAIN), {})
    assert answer["error"]["data"]["rule"] == "overage_ceiling"
    assert f"overage ceiling of {10_000_000}" in answer["error"]["message"]
    assert (await credits(client, auth))["usedThisCycle"] == held

    # The hold moved the project into overage: the alerts say so.
    await services.platform.meter.check_due_alerts()
    r = await client.get("/v1/alerts", headers=auth)
    assert {a["kind"] for a in r.json()} == {"credits.low", "credits.overage"}

    # An op refused for its fee changes nothing; the credits answer as before.
    greedy = replace(draft, nonce=draft.nonce + 2, max_fee_per_gas=2**85)
    bad = await call(client, auth, "pm_getPaymasterData", unsigned(greedy), ep, hex(CHAIN), {})
    assert bad["error"]["code"] == -32602
    last = await credits(client, auth)
    assert (last["balance"], last["usedThisCycle"], last["overageThisCycle"]) == (
        0,
        held,
        held - 1_000_000,
    )


async def test_the_chain_id_parameter_must_be_the_hex_string(
    service: Service, harness: Harness
) -> None:
    client, _ = service
    _, auth = await tenant(service[1])
    ep = harness.deployment.entry_point
    raw = unsigned(await harness.build_op(harness.new_key().address, b""))
    for chain_id in (True, CHAIN, float(CHAIN)):
        answer = await call(client, auth, "pm_getPaymasterData", raw, ep, chain_id, {})
        assert answer["error"]["code"] == -32602
        assert answer["error"]["message"].startswith("chainId: expected a hex string")
    assert (await credits(client, auth))["usedThisCycle"] == 0
