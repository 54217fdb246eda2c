"""POST /rpc/{chainId} on a real devnet: a sponsored op is accounted (relay charge, hold link,
settlement task) in one transaction before it enters the mempool, so a failure there refuses
the op with a JSON-RPC error and leaves nothing behind; any failure inside a call is answered
as a JSON-RPC error carrying its id, and the rest of a batch still runs."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.rpc_types import user_operation_json
from entryway.domain.plans import PlanName
from entryway.domain.signatures import sign_digest
from entryway.domain.userop import UserOperation, user_op_hash
from entryway.paymaster.relay_accounting import op_usage_key
from entryway.paymaster.settlement import SETTLE_TASK
from entryway.service.services import Services
from entryway.storage.tasks import TaskQueue
from tests.integration.bundler import test_service_chain_routes as chain_routes
from tests.integration.bundler.test_service_chain_routes import CHAIN, rpc, tenant
from tests.integration.harness import ETHER, Harness
from tests.integration.test_erc7677 import with_fields

Client = tuple[httpx.AsyncClient, Services]
service = chain_routes.service  # the fixture: a service over the devnet's bundler


class InjectedFaultError(RuntimeError):
    pass


async def sponsored_op(
    client: httpx.AsyncClient, auth: dict[str, str], harness: Harness
) -> UserOperation:
    """An op our paymaster signed for the caller's project (its estimate now held)."""
    ep = harness.deployment.entry_point
    owner = harness.new_key()
    draft = await harness.build_op(owner.address, b"")
    raw = user_operation_json(draft)
    del raw["signature"]
    r = await client.post(
        f"/rpc/{CHAIN}", headers=auth, json=rpc("pm_getPaymasterData", raw, ep, hex(CHAIN), {})
    )
    op = with_fields(draft, r.json()["result"])
    return op.with_signature(sign_digest(bytes(owner.key), user_op_hash(op, ep, CHAIN)))


async def test_an_op_whose_accounting_fails_is_refused_and_leaves_nothing_behind(
    service: Client,
    harness: Harness,
    bundler_rpc: BundlerRpc,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client, services = service
    pid, key = await tenant(services, PlanName.FREE, [CHAIN])
    auth = {"Authorization": f"Bearer {key}"}
    op = await sponsored_op(client, auth, harness)
    op_hash = "0x" + user_op_hash(op, harness.deployment.entry_point, CHAIN).hex()
    send = rpc("eth_sendUserOperation", user_operation_json(op), harness.deployment.entry_point)
    ledger, queue = services.store.ledger, TaskQueue(services.store.engine)
    balance = (await services.store.credit_account(pid)).balance(datetime.now(UTC))

    async def fault(*args: object, **kwargs: object) -> None:
        raise InjectedFaultError("the database went away")

    with monkeypatch.context() as patched:
        patched.setattr(TaskQueue, "enqueue_in", fault)
        r = await client.post(f"/rpc/{CHAIN}", headers=auth, json=send)
    assert r.status_code == 200, r.text
    assert r.json() == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32603, "message": "internal error"},
    }
    assert bundler_rpc.bundler.mempool.entries() == []  # never bundled unaccounted
    assert not await ledger.owns(pid, op_usage_key(CHAIN, op_hash))
    assert await ledger.credits_for(pid, op_hash) == (0, True)  # the hold is not linked
    assert await queue.list(pid) == []
    assert (await services.store.credit_account(pid)).balance(datetime.now(UTC)) == balance

    # Sent again once the database is back: accepted, accounted once.
    r = await client.post(f"/rpc/{CHAIN}", headers=auth, json=send)
    assert r.json()["result"] == op_hash
    again = await client.post(f"/rpc/{CHAIN}", headers=auth, json=send)
    assert again.json()["error"]["code"] == -32602  # already in the mempool at this fee
    assert [e.op.nonce for e in bundler_rpc.bundler.mempool.entries()] == [op.nonce]
    assert await ledger.owns(pid, op_usage_key(CHAIN, op_hash))
    held, final = await ledger.credits_for(pid, op_hash)
    assert held > 0 and not final
    assert [t.kind for t in await queue.list(pid)] == [SETTLE_TASK]
    await bundler_rpc.dispatch(rpc("debug_bundler_sendBundleNow"))


async def test_an_unexpected_failure_is_a_json_rpc_error_and_the_batch_goes_on(
    service: Client,
    bundler_rpc: BundlerRpc,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    client, services = service
    _, key = await tenant(services, PlanName.FREE, [CHAIN])
    headers = {"Authorization": f"Bearer {key}", "X-Request-Id": "req-42"}
    dispatch = bundler_rpc.dispatch

    async def faulty(request: Any, **kwargs: Any) -> dict[str, Any] | None:
        if isinstance(request, dict) and request.get("method") == "eth_getUserOperationReceipt":
            raise InjectedFaultError("secret internals")
        return await dispatch(request, **kwargs)

    monkeypatch.setattr(bundler_rpc, "dispatch", faulty)
    broken = {**rpc("eth_getUserOperationReceipt", "0x" + "00" * 32), "id": "a"}
    with caplog.at_level(logging.ERROR):
        r = await client.post(f"/rpc/{CHAIN}", headers=headers, json=broken)
    assert r.status_code == 200
    assert r.json() == {
        "jsonrpc": "2.0",
        "id": "a",
        "error": {"code": -32603, "message": "internal error"},
    }
    logged = [rec for rec in caplog.records if rec.exc_info]
    assert len(logged) == 1 and "req-42" in logged[0].getMessage()

    batch = [broken, {**rpc("eth_chainId"), "id": "b"}, {**broken, "id": None}]
    r = await client.post(f"/rpc/{CHAIN}", headers=headers, json=batch)
    assert r.status_code == 200
    answers = r.json()
    assert [a["id"] for a in answers] == ["a", "b", None]
    assert answers[0]["error"]["code"] == answers[2]["error"]["code"] == -32603
    assert answers[1]["result"] == hex(CHAIN)
    assert "secret" not in r.text


async def test_of_two_ops_racing_for_one_nonce_only_the_one_admitted_is_charged(
    service: Client, harness: Harness, bundler_rpc: BundlerRpc
) -> None:
    client, services = service
    pid, key = await tenant(services, PlanName.FREE, [CHAIN])
    auth = {"Authorization": f"Bearer {key}"}
    ep = harness.deployment.entry_point
    payer = harness.new_key()
    first = await harness.build_op(payer.address, b"")
    await harness.fund(first.sender, ETHER)
    # Same sender and nonce, a fee too close to replace the other: only one may enter.
    second = replace(first, max_fee_per_gas=first.max_fee_per_gas + 1)
    ops = [harness.sign(op, payer) for op in (first, second)]
    answers = await asyncio.gather(
        *(
            client.post(
                f"/rpc/{CHAIN}",
                headers=auth,
                json=rpc("eth_sendUserOperation", user_operation_json(op), ep),
            )
            for op in ops
        )
    )
    bodies = [a.json() for a in answers]
    accepted = [b["result"] for b in bodies if "result" in b]
    assert len(accepted) == 1, bodies
    assert [b["error"]["code"] for b in bodies if "error" in b] == [-32602]
    usage = [
        e
        async for e in services.platform.usage.events(
            pid, datetime(2026, 1, 1, tzinfo=UTC), datetime.now(UTC)
        )
    ]
    assert len(usage) == 1  # the refused op was never charged
    for op in ops:
        op_hash = "0x" + user_op_hash(op, ep, CHAIN).hex()
        owned = await services.store.ledger.owns(pid, op_usage_key(CHAIN, op_hash))
        assert owned is (op_hash in accepted)
    await bundler_rpc.dispatch(rpc("debug_bundler_sendBundleNow"))
