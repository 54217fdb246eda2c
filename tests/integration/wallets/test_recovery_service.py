"""Recovery run by the service, through its HTTP API on anvil: the owner's key is lost, the
guardians approve over the API, the service submits startRecovery and (after the account's
delay) finalizeRecovery as UserOperations its own paymaster sponsors, through the chain's
bundler, as durable tasks; the project sees each step, gets the webhook events and pays the
recovery's credits. An owner who still has the key cancels, and the service notices."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from eth_account.messages import encode_typed_data
from eth_account.signers.local import LocalAccount
from sqlalchemy import select

from entryway.domain.apikeys import KeyEnvironment
from entryway.domain.destinations import PRIVATE_ALLOWED
from entryway.domain.tasks import RetryTaskError
from entryway.domain.webhooks import EventType
from entryway.service.wallet_wiring import recovery_flows
from entryway.storage.ledger import UsageStatus
from entryway.storage.schema import webhook_events
from entryway.storage.tasks import TaskQueue
from entryway.storage.webhooks import WebhookStore
from entryway.wallets.recoveries import FINALIZE_TASK, START_TASK, RecoverySettings
from entryway.wallets.tasks import wallet_task_handlers
from entryway.worker.worker import Worker
from tests.integration.conftest import CHAIN_ID
from tests.integration.harness import ACCOUNT, Harness
from tests.integration.wallets.conftest import Service, guarded_wallet
from tests.integration.webhooks.support import SECRETS

DELAY = 2 * 24 * 3600
BASE_SEPOLIA = 84532
SETTINGS = RecoverySettings(receipt_wait_s=20, poll_s=0.1)
RECOVERY_EVENTS = [e.value for e in (
    EventType.RECOVERY_STARTED, EventType.RECOVERY_FINALIZED, EventType.RECOVERY_CANCELLED,
)]  # fmt: skip


def approval(
    guardian: LocalAccount, recovery: dict[str, Any], *, claimed: str | None = None
) -> dict[str, str]:
    """What a guardian's wallet sends: its eth_signTypedData_v4 of the recovery's typed data."""
    signed = guardian.sign_message(encode_typed_data(full_message=recovery["typedData"]))
    return {"guardian": claimed or guardian.address, "signature": "0x" + signed.signature.hex()}


async def events_of(service: Service, project_id: str) -> list[dict[str, Any]]:
    async with service.services.store.engine.connect() as db:
        rows = await db.execute(
            select(webhook_events.c.event_type, webhook_events.c.body)
            .where(webhook_events.c.project_id == project_id)
            .order_by(webhook_events.c.created_at)
        )
        return [{"type": t, **json.loads(b)} for t, b in rows]


async def run_task(service: Service, task_id: str) -> Any:
    """Run one task's handler, as a worker would, whenever it is scheduled."""
    handlers = wallet_task_handlers(recovery_flows(service.services, SETTINGS))
    task = await TaskQueue(service.services.store.engine).find(task_id)
    assert task is not None
    return await handlers[task.kind](task)


async def test_guardians_recover_a_lost_account_through_the_api(
    service: Service, harness: Harness
) -> None:
    client = service.client
    g1, g2, outsider = harness.new_key(), harness.new_key(), harness.new_key()
    wallet = await guarded_wallet(harness, [g1, g2], threshold=2)
    new_owner = harness.new_key()
    pid, auth = await service.tenant()
    await WebhookStore(
        service.services.store.engine, destinations=PRIVATE_ALLOWED, secrets=SECRETS
    ).create_endpoint(pid, "http://127.0.0.1:9/hooks", RECOVERY_EVENTS)

    body = {"chainId": CHAIN_ID, "account": wallet.address, "newOwner": new_owner.address}
    r = await client.post("/v1/recoveries", json=body, headers=auth)
    assert r.status_code == 201, r.text
    recovery = r.json()
    rid = recovery["id"]
    assert (recovery["state"], recovery["threshold"], recovery["approvalsNeeded"]) == (
        "collecting", 2, 2,
    )  # fmt: skip
    assert sorted(recovery["guardians"]) == sorted([g1.address, g2.address])
    assert recovery["typedData"]["message"]["recoveryNonce"] == 0
    assert recovery["start"]["state"] == "waiting" and recovery["start"]["taskId"] is None

    url = f"/v1/recoveries/{rid}/approvals"
    r = await client.post(url, json=approval(g1, recovery), headers=auth)
    assert r.status_code == 200, r.text
    assert (r.json()["state"], r.json()["approvalsNeeded"]) == ("collecting", 1)

    # Refused with a clear error: someone else's signature in g2's name, an outsider's own.
    r = await client.post(url, json=approval(outsider, recovery, claimed=g2.address), headers=auth)
    assert (r.status_code, r.json()["code"]) == (422, "invalid_signature"), r.text
    assert g2.address in r.json()["detail"]
    r = await client.post(url, json=approval(outsider, recovery), headers=auth)
    assert (r.status_code, r.json()["code"]) == (422, "not_a_guardian"), r.text
    # Another project's key sees nothing of it.
    _, other = await service.tenant()
    assert (await client.get(f"/v1/recoveries/{rid}", headers=other)).status_code == 404
    r = await client.post(url, json=approval(g2, recovery), headers=other)
    assert (r.status_code, r.json()["code"]) == (404, "recovery_not_found")
    # A key of the same project on another chain only: the recovery's chain is not its.
    store, now = service.services.store, datetime.now(UTC)
    await store.update_project(pid, chains=[CHAIN_ID, BASE_SEPOLIA])
    elsewhere = await store.issue_key(pid, KeyEnvironment.TEST, [BASE_SEPOLIA], now)
    other_chain = {"Authorization": f"Bearer {elsewhere.secret}"}
    for r in (
        await client.get(f"/v1/recoveries/{rid}", headers=other_chain),
        await client.post(url, json=approval(g2, recovery), headers=other_chain),
    ):
        assert (r.status_code, r.json()["code"]) == (403, "chain_not_recognised"), r.text

    r = await client.post(url, json=approval(g2, recovery), headers=auth)
    starting = r.json()
    assert (starting["state"], starting["start"]["state"]) == ("starting", "queued"), r.text
    start_task = starting["start"]["taskId"]
    r = await client.get("/task-status", params={"id": start_task}, headers=auth)
    assert (r.json()["kind"], r.json()["state"]) == (START_TASK, "queued")

    # A worker runs the start task: the op is sponsored, sent, mined.
    queue = TaskQueue(service.services.store.engine)
    worker = Worker(queue, wallet_task_handlers(recovery_flows(service.services, SETTINGS)))
    assert await worker.drain() == 1
    started = (await client.get(f"/v1/recoveries/{rid}", headers=auth)).json()
    assert started["state"] == "started", started
    start = started["start"]
    assert start["state"] == "done" and start["transactionHash"] and start["userOpHash"]
    pending_owner, execute_after = await harness.call(wallet.address, ACCOUNT, "pendingRecovery")
    assert (pending_owner, execute_after) == (new_owner.address, start["executeAfter"])
    assert execute_after >= await harness.latest_timestamp() + DELAY - 5
    finalize_task = started["finalize"]["taskId"]
    assert started["finalize"]["state"] == "queued"
    task = await queue.find(finalize_task)
    assert task is not None and task.kind == FINALIZE_TASK
    assert (task.run_at - task.created_at).total_seconds() > DELAY - 60  # due after the delay
    r = await client.get(
        "/op-status", params={"chainId": CHAIN_ID, "userOpHash": start["userOpHash"]}, headers=auth
    )
    assert r.json()["status"] == "included", r.text

    # Not due yet (in chain time): the finalize task asks to run again later, submits nothing.
    assert await worker.drain() == 0
    with pytest.raises(RetryTaskError, match="due in"):
        await run_task(service, finalize_task)
    assert (await client.get(f"/v1/recoveries/{rid}", headers=auth)).json()["finalize"] == (
        started["finalize"]
    )
    await harness.advance_time(DELAY + 1)
    assert await run_task(service, finalize_task) == {"recoveryId": rid, "state": "finalized"}
    assert await harness.call(wallet.address, ACCOUNT, "owner") == new_owner.address
    done = (await client.get(f"/v1/recoveries/{rid}", headers=auth)).json()
    assert (done["state"], done["finalize"]["state"]) == ("finalized", "done")
    assert done["finalize"]["transactionHash"] and done["failureReason"] is None

    events = await events_of(service, pid)
    assert [e["type"] for e in events] == ["recovery.started", "recovery.finalized"]
    assert events[0]["data"]["transactionHash"] == start["transactionHash"]
    assert events[0]["data"]["executeAfter"] == execute_after
    assert events[1]["data"]["newOwner"] == new_owner.address

    # Each step was charged: sponsorship at the actual gas + the recovery (with the
    # guardians' two confirmations for the start), settled from its receipt.
    steps = {c["endpoint"]: c for c in await service.charges(pid) if c["endpoint"]}
    started_charge = steps["wallets:recovery.start"]
    finalized_charge = steps["wallets:recovery.finalize"]
    assert started_charge["breakdown"]["recovery"] == 2_000 + 2 * 250
    assert finalized_charge["breakdown"]["recovery"] == 2_000
    for charge in (started_charge, finalized_charge):
        assert charge["status"] == UsageStatus.SETTLED and charge["subject"] == wallet.address
        assert charge["credits"] == sum(charge["breakdown"].values())
    balance = (await service.services.store.credit_account(pid)).balance(datetime.now(UTC))
    assert balance == 1_000_000 - started_charge["credits"] - finalized_charge["credits"]


async def test_an_owner_who_cancels_on_chain_is_noticed(service: Service, harness: Harness) -> None:
    client = service.client
    g1 = harness.new_key()
    wallet = await guarded_wallet(harness, [g1], threshold=1)
    pid, auth = await service.tenant()
    await WebhookStore(
        service.services.store.engine, destinations=PRIVATE_ALLOWED, secrets=SECRETS
    ).create_endpoint(pid, "http://127.0.0.1:9/hooks", RECOVERY_EVENTS)
    thief = harness.new_key()

    async def open_recovery(account: str, new_owner: str) -> Any:
        body = {"chainId": CHAIN_ID, "account": account, "newOwner": new_owner}
        return await client.post("/v1/recoveries", json=body, headers=auth)

    # Refused up front: no account there, the current owner as the new one.
    r = await open_recovery(harness.new_key().address, thief.address)
    assert (r.status_code, r.json()["code"]) == (422, "not_a_smart_account")
    r = await open_recovery(wallet.address, wallet.owner.address)
    assert (r.status_code, r.json()["code"]) == (422, "invalid_new_owner")

    recovery = (await open_recovery(wallet.address, thief.address)).json()
    r = await open_recovery(wallet.address, thief.address)
    assert (r.status_code, r.json()["code"]) == (409, "recovery_in_progress")
    url = f"/v1/recoveries/{recovery['id']}"
    r = await client.post(f"{url}/approvals", json=approval(g1, recovery), headers=auth)
    assert r.json()["state"] == "starting"
    assert (await run_task(service, r.json()["start"]["taskId"]))["state"] == "started"
    started = (await client.get(url, headers=auth)).json()
    assert started["state"] == "started", started

    # The owner still holds the key, and cancels during the delay.
    cancel = await harness.send_from(
        wallet.owner, wallet.address, ACCOUNT.encode_call("cancelRecovery")
    )
    cancelled = (await client.get(url, headers=auth)).json()
    assert (cancelled["state"], cancelled["finalize"]["state"]) == ("cancelled", "skipped")
    events = await events_of(service, pid)
    assert [e["type"] for e in events] == ["recovery.started", "recovery.cancelled"]
    assert events[1]["data"]["transactionHash"] == cancel.tx_hash
    # The finalize task, when its time comes, finds nothing to do and submits nothing.
    await harness.advance_time(DELAY + 1)
    finalize_task = started["finalize"]["taskId"]
    assert await run_task(service, finalize_task) == {
        "recoveryId": recovery["id"],
        "state": "cancelled",
    }
    endpoints = [c["endpoint"] for c in await service.charges(pid)]
    assert "wallets:recovery.finalize" not in endpoints
    assert await harness.call(wallet.address, ACCOUNT, "owner") == wallet.owner.address
    # A new recovery may be opened; it binds to the new recovery nonce.
    r = await open_recovery(wallet.address, thief.address)
    assert r.status_code == 201 and r.json()["recoveryNonce"] == 1


async def test_a_start_the_account_refuses_fails_with_its_reason(
    service: Service, harness: Harness
) -> None:
    client = service.client
    g1, g2 = harness.new_key(), harness.new_key()
    wallet = await guarded_wallet(harness, [g1, g2], threshold=1)
    pid, auth = await service.tenant()
    body = {"chainId": CHAIN_ID, "account": wallet.address, "newOwner": harness.new_key().address}
    recovery = (await client.post("/v1/recoveries", json=body, headers=auth)).json()
    url = f"/v1/recoveries/{recovery['id']}"
    r = await client.post(f"{url}/approvals", json=approval(g1, recovery), headers=auth)
    assert r.json()["state"] == "starting"
    # Before the service submits, the owner removes the guardian who approved.
    remove = ACCOUNT.encode_call("removeGuardian", g1.address)
    op = await harness.build_op(
        wallet.owner.address, ACCOUNT.encode_call("execute", wallet.address, 0, remove),
        sender=wallet.address,
    )  # fmt: skip
    assert (
        (await harness.handle_ops([harness.sign(harness.sponsor(op), wallet.owner)]))
        .outcomes[0]
        .success
    )

    assert await run_task(service, r.json()["start"]["taskId"]) == {
        "recoveryId": recovery["id"],
        "state": "failed",
    }
    failed = (await client.get(url, headers=auth)).json()
    assert (failed["state"], failed["start"]["state"]) == ("failed", "failed")
    assert "refused" in failed["failureReason"], failed
    assert "NotEnoughApprovals()" in failed["failureReason"], failed
    assert not [c for c in await service.charges(pid) if c["status"] == UsageStatus.HELD]


async def test_the_counterfactual_address_is_the_factorys(
    service: Service, harness: Harness
) -> None:
    _, auth = await service.tenant()
    owner = harness.new_key().address
    params: dict[str, str | int]
    for salt in (0, 7, 2**256 - 1):
        params = {"chainId": CHAIN_ID, "owner": owner.lower(), "salt": str(salt)}
        r = await service.client.get("/v1/wallets/address", params=params, headers=auth)
        assert r.status_code == 200, r.text
        got = r.json()
        assert got["address"] == await harness.account_address(owner, salt)
        assert (got["owner"], got["salt"], got["deployed"]) == (owner, str(salt), False)
    wallet = await guarded_wallet(harness, [harness.new_key()], threshold=1)
    params = {"chainId": CHAIN_ID, "owner": wallet.owner.address}
    r = await service.client.get("/v1/wallets/address", params=params, headers=auth)
    assert (r.json()["address"], r.json()["deployed"]) == (wallet.address, True)
    params = {"chainId": 8453, "owner": owner}  # not a chain of this key
    r = await service.client.get("/v1/wallets/address", params=params, headers=auth)
    assert (r.status_code, r.json()["code"]) == (403, "chain_not_recognised")
