"""The service's chain-bound routes on a real devnet: the JSON-RPC endpoint metered per
project, /op-status scoped to the project that sent the op, /account-info reading the chain,
and the "network connection problem" checks of requirements §7 (unreachable RPC, wrong chain
id, maintenance)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
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
from entryway.domain.signatures import sign_digest
from entryway.domain.tasks import RetryTaskError
from entryway.domain.userop import user_op_hash
from entryway.paymaster.erc7677 import PaymasterChain, PaymasterRpc
from entryway.paymaster.settlement import (
    SETTLE_TASK,
    SettleHandler,
    SponsorshipSettler,
)
from entryway.paymaster.signer import PaymasterSigner
from entryway.service.app import create_app
from entryway.service.services import ChainRuntime, Services
from entryway.service.wallet_wiring import bundler_port
from entryway.storage.engine import make_engine, migrate, sqlite_url
from entryway.storage.ledger import UsageStatus
from entryway.storage.policies import PolicyStore, SqlSponsorshipUsage
from entryway.storage.store import Store
from entryway.storage.tasks import TaskQueue
from tests.integration.harness import ETHER, Harness
from tests.integration.test_erc7677 import with_fields

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
    store = services.store
    services.paymaster = PaymasterRpc(
        {
            CHAIN: PaymasterChain.on(
                eth,
                CHAIN,
                deployment.entry_point,
                deployment.paymaster,
                also=deployment.other_paymasters(),
            )
        },
        PaymasterSigner(devnet.keys.paymaster_signer),
        PolicyStore(store.engine),
        SqlSponsorshipUsage(store.engine),
        store.ledger,
        services.prices,
    )

    services.settler = SponsorshipSettler(
        store.ledger, services.prices, {CHAIN: bundler_port(services.chains[CHAIN])}
    )
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

    # Our paymaster's op was paid at sponsorship: relaying it is free; the other pays the
    # relay and, as it deploys its account, the account creation (shown as what it is).
    prices = services.prices
    relay = prices.validation + prices.relay_per_call + prices.account_creation
    usage = [
        e
        async for e in services.platform.usage.events(
            pid, datetime(2026, 1, 1, tzinfo=UTC), datetime.now(UTC)
        )
    ]
    assert sorted((e.operation, e.credits, e.subject) for e in usage) == sorted(
        [
            ("relayed_user_operation", 0, sponsored.sender),
            ("account_creation", relay, own_gas.sender),
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
    services.maintenance.configured.add(CHAIN)
    assert (await checks(CHAIN))["not_under_maintenance"] is False
    services.maintenance.configured.clear()
    r = await client.get("/get-sdk-defaults", params={"chainId": CHAIN}, headers=auth)
    assert r.status_code == 200 and r.json()["chainId"] == CHAIN
    # anvil serves the struct logger: every ERC-7562 rule enforced
    assert r.json()["validationMode"] == "opcodes" and r.json()["uncheckedRules"] == []
    listed = (await client.get("/sdk-defaults", headers=auth)).json()["chains"]
    assert list(listed) == [str(CHAIN)]  # the unhealthy chains are left out


async def test_sponsorship_through_the_service_holds_then_settles_on_the_receipt(
    service: tuple[httpx.AsyncClient, Services], harness: Harness, bundler_rpc: BundlerRpc
) -> None:
    client, services = service
    pid, key = await tenant(services, PlanName.FREE, [CHAIN])
    auth = {"Authorization": f"Bearer {key}"}
    ep = harness.deployment.entry_point
    owner = harness.new_key()
    draft = await harness.build_op(owner.address, b"")
    raw = user_operation_json(draft)
    del raw["signature"]
    params = [raw, ep, hex(CHAIN), {}]

    url = f"/rpc/{CHAIN}"
    r = await client.post(url, headers=auth, json=rpc("pm_getPaymasterStubData", *params))
    stub = r.json()["result"]
    assert stub["paymaster"] == harness.deployment.paymaster and stub["isFinal"] is False
    balance = services.store.credit_account
    assert (await balance(pid)).balance(datetime.now(UTC)) == 1_000_000  # the stub holds nothing
    r = await client.post(url, headers=auth, json=rpc("pm_getPaymasterData", *params))
    held = 1_000_000 - (await balance(pid)).balance(datetime.now(UTC))
    assert held > 0  # the estimate is held at signing
    op = with_fields(draft, r.json()["result"])
    op = op.with_signature(sign_digest(bytes(owner.key), user_op_hash(op, ep, CHAIN)))
    send = rpc("eth_sendUserOperation", user_operation_json(op), ep)
    r = await client.post(url, headers=auth, json=send)
    op_hash = r.json()["result"]
    assert services.settler is not None
    status = {"chainId": CHAIN, "userOpHash": op_hash}
    r = await client.get("/op-status", params=status, headers=auth)
    assert (r.json()["credits"], r.json()["creditsFinal"]) == (held, False)
    # The durable task that settles it: due in a moment, retried until the receipt is there.
    later = TaskQueue(services.store.engine, clock=lambda: datetime.now(UTC) + timedelta(1))
    (task,) = await later.claim("test", [SETTLE_TASK], lease_seconds=30)
    assert task.payload["userOpHash"] == op_hash
    handler = SettleHandler(services.settler)
    with pytest.raises(RetryTaskError):
        await handler(task)  # not mined yet
    await bundler_rpc.dispatch(rpc("debug_bundler_sendBundleNow"))
    assert await handler(task) == {"settled": op_hash}

    events = {
        e.operation: e
        async for e in services.platform.usage.events(
            pid, datetime(2026, 1, 1, tzinfo=UTC), datetime.now(UTC)
        )
    }
    sponsorship = events["sponsored_user_operation"]
    assert sponsorship.status == UsageStatus.SETTLED and sponsorship.credits > 0
    assert events["relayed_user_operation"].credits == 0
    # Exactly the settled sponsorship left the balance (FREE grant: 1M credits), less than held.
    assert (await balance(pid)).balance(datetime.now(UTC)) == 1_000_000 - sponsorship.credits
    assert sponsorship.credits < held
    r = await client.get("/op-status", params=status, headers=auth)
    assert r.json()["status"] == "included"
    assert (r.json()["credits"], r.json()["creditsFinal"]) == (sponsorship.credits, True)
    receipt = await bundler_rpc.get_user_operation_receipt([op_hash])
    assert receipt is not None and receipt["success"] is True

    # Signed, never sent: the hold is released once the window has passed, not before.
    unsent = replace(draft, nonce=draft.nonce + 1)
    raw2 = user_operation_json(unsent)
    del raw2["signature"]
    await client.post(url, headers=auth, json=rpc("pm_getPaymasterData", raw2, ep, hex(CHAIN), {}))
    assert await services.settler.sweep() == 0
    services.settler.unsent_after = timedelta(0)
    assert await services.settler.sweep() == 1
    assert (await balance(pid)).balance(datetime.now(UTC)) == 1_000_000 - sponsorship.credits

    # A wrong entry point is refused in the JSON-RPC envelope, not as an HTTP error.
    bad = [raw, "0x" + "11" * 20, hex(CHAIN), {}]
    r = await client.post(f"/rpc/{CHAIN}", headers=auth, json=rpc("pm_getPaymasterData", *bad))
    assert r.status_code == 200 and r.json()["error"]["code"] == -32602


async def test_a_free_project_is_refused_on_mainnets_whatever_it_enabled(
    service: tuple[httpx.AsyncClient, Services],
) -> None:
    client, services = service
    _, key = await tenant(services, PlanName.FREE, [137, 8453, CHAIN])
    auth = {"Authorization": f"Bearer {key}"}
    for chain_id in (137, 8453):
        r = await client.post(f"/rpc/{chain_id}", headers=auth, json=rpc("pm_getPaymasterData"))
        assert r.status_code == 403, r.text
        assert r.json()["code"] == "plan_network_not_allowed"
        assert "testnet" in r.json()["detail"]
        r = await client.get("/get-sdk-defaults", params={"chainId": chain_id}, headers=auth)
        assert r.json()["code"] == "plan_network_not_allowed"
    r = await client.get("/get-sdk-defaults", params={"chainId": CHAIN}, headers=auth)
    assert r.status_code == 200
