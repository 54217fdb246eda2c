"""Bounds where an op enters the service, on a real devnet (Amoy's fee rules) and a real
ledger (SQLite): fees past the chain's ceiling are refused with -32602 by the paymaster and the
bundler alike and hold nothing; a paymaster gas limit past the documented maximum is refused,
not lowered; overage never stops sponsorship unless the project's owner set a spending budget,
and then a hold past it is refused with -32501 `budget_exceeded` after the budget alert;
/v1/credits and the alerts answer all along."""

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
from entryway.domain.apikeys import KeyEnvironment, KeyRole
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
    """A FREE project (1,000,000 credits a month) and a service key."""
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


async def test_overage_never_stops_sponsorship_unless_the_owner_set_a_budget(
    service: Service, harness: Harness
) -> None:
    client, services = service
    pid, auth = await tenant(services)
    admin = await services.store.issue_key(
        pid, KeyEnvironment.TEST, [CHAIN], datetime.now(UTC), role=KeyRole.ADMIN
    )
    owner = {"Authorization": f"Bearer {admin.secret}"}
    ep = harness.deployment.entry_point
    # Dear but within Amoy's bounds: 40,000 gwei a gas is 8 credits at 0.20 EUR a POL.
    dear = {"max_fee_per_gas": 40_000 * GWEI, "max_priority_fee_per_gas": 30 * GWEI}
    draft = replace(await harness.build_op(harness.new_key().address, b""), **dear)

    async def sponsor(op: UserOperation) -> Any:
        return await call(client, auth, "pm_getPaymasterData", unsigned(op), ep, hex(CHAIN), {})

    # No budget: a hold of ~21.8M credits, twenty monthly allowances, goes through.
    huge = replace(draft, call_gas_limit=2_000_000)
    assert "result" in await sponsor(huge)
    first = await credits(client, auth)
    assert first["overageBudget"] is None
    assert first["usedThisCycle"] > 20_000_000
    assert first["overageThisCycle"] == first["usedThisCycle"] - 1_000_000
    assert "result" in await sponsor(draft)  # ~8.2M more, all overage
    second = await credits(client, auth)
    one_op = second["usedThisCycle"] - first["usedThisCycle"]
    assert one_op > 1_000_000
    await services.platform.meter.check_due_alerts()
    kinds = {a["kind"] for a in (await client.get("/v1/alerts", headers=auth)).json()}
    assert kinds == {"credits.low", "credits.overage"}  # no budget, no budget alert

    # A service key cannot set the budget; the owner's admin key can: room for one more op.
    budget = second["overageThisCycle"] + one_op
    patch = {"overageBudget": budget}
    assert (await client.patch("/v1/project", headers=auth, json=patch)).status_code in (401, 403)
    r = await client.patch("/v1/project", headers=owner, json=patch)
    assert r.status_code == 200 and r.json()["overageBudget"] == budget
    assert (await credits(client, auth))["overageBudget"] == budget

    # The same op again is the same hold; the next fits the budget exactly; the one after
    # would take the overage past it and is refused, holding nothing.
    assert "result" in await sponsor(draft)
    assert "result" in await sponsor(replace(draft, nonce=draft.nonce + 1))
    at_budget = await credits(client, auth)
    assert at_budget["overageThisCycle"] == budget
    answer = await sponsor(replace(draft, nonce=draft.nonce + 2))
    assert answer["error"]["code"] == -32501
    data = answer["error"]["data"]
    assert data == {**data, "rule": "budget_exceeded", "policyId": None}
    assert data["explanation"].startswith("Sponsorship refused (budget_exceeded): ")
    assert f"spending budget of {budget} credits" in answer["error"]["message"]
    assert (await credits(client, auth))["usedThisCycle"] == at_budget["usedThisCycle"]

    # The budget alert came before the refusal, once for the cycle.
    await services.platform.meter.check_due_alerts()
    alerts = (await client.get("/v1/alerts", headers=auth)).json()
    [warned] = [a for a in alerts if a["kind"] == "credits.budget"]
    assert f"spending budget of {budget}" in warned["detail"]

    # An op refused for its fee changes nothing; the credits answer as before.
    greedy = replace(draft, nonce=draft.nonce + 2, max_fee_per_gas=2**85)
    bad = await sponsor(greedy)
    assert bad["error"]["code"] == -32602
    assert (await credits(client, auth))["usedThisCycle"] == at_budget["usedThisCycle"]

    # Lifting the budget (null) lets sponsorship go on past it; a budget too large for the
    # database is refused.
    r = await client.patch("/v1/project", headers=owner, json={"overageBudget": 2**63})
    assert r.status_code == 422
    r = await client.patch("/v1/project", headers=owner, json={"overageBudget": None})
    assert r.status_code == 200 and r.json()["overageBudget"] is None
    assert "result" in await sponsor(replace(draft, nonce=draft.nonce + 2))
    assert (await credits(client, auth))["overageThisCycle"] == budget + one_op


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
