"""An op refused at send (real devnet): `GET /v1/ops/{userOpHash}` answers `refused` with the
JSON-RPC error, its plain explanation, when and with which key, rather than "not found"; it
was never charged; another project does not see it; an op later accepted has its full page."""

from __future__ import annotations

import httpx

from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.rpc_types import user_operation_json
from entryway.domain.evm import to_hex
from entryway.domain.plans import PlanName
from entryway.service.services import Services
from entryway.storage.request_log import SEND, LogFilter, RequestLogRecords
from tests.integration.bundler.test_service_chain_routes import (  # noqa: F401 (fixture)
    CHAIN,
    rpc,
    service,
    tenant,
)
from tests.integration.harness import ETHER, Harness


async def test_a_refused_send_has_a_page_with_its_reason(
    service: tuple[httpx.AsyncClient, Services],  # noqa: F811
    harness: Harness,
    bundler_rpc: BundlerRpc,
) -> None:
    client, services = service
    _, key = await tenant(services, PlanName.FREE, [CHAIN])
    auth = {"Authorization": f"Bearer {key}"}
    owner = harness.new_key()
    op = harness.sign(await harness.build_op(owner.address, b""), owner)  # no funds: AA21
    op_hash = to_hex(await bundler_rpc.bundler.op_hash(op))
    ep = harness.deployment.entry_point
    r = await client.post(
        f"/rpc/{CHAIN}",
        headers=auth,
        json=rpc("eth_sendUserOperation", user_operation_json(op), ep),
    )
    error = r.json()["error"]
    assert services.request_log is not None
    await services.request_log.flush()

    r = await client.get(f"/v1/ops/{op_hash}", headers=auth)
    assert r.status_code == 200, r.text
    page = r.json()
    assert (page["status"], page["chainId"], page["userOpHash"]) == ("refused", CHAIN, op_hash)
    assert page["reason"] == error["message"] and "AA21" in page["reason"]
    refusal = page["refusal"]
    assert refusal["code"] == error["code"]
    assert refusal["explanation"] == error["data"]["explanation"]
    assert f"_{refusal['keyPrefix']}_" in key  # the key's id, never the secret
    assert (refusal["sender"], refusal["times"]) == (op.sender.lower(), 1)
    assert [s["step"] for s in page["lifecycle"]] == ["received", "refused"]
    assert page["lifecycle"][1]["reason"] == error["message"]
    assert page["credits"] == {"total": 0, "final": True, "charges": []}
    assert page["transactionHash"] is None

    # Sent again, refused again: counted.
    await client.post(
        f"/rpc/{CHAIN}",
        headers=auth,
        json=rpc("eth_sendUserOperation", user_operation_json(op), ep),
    )
    await services.request_log.flush()
    assert (await client.get(f"/v1/ops/{op_hash}", headers=auth)).json()["refusal"]["times"] == 2

    # Another project does not see it.
    _, other = await tenant(services, PlanName.FREE, [CHAIN])
    r = await client.get(f"/v1/ops/{op_hash}", headers={"Authorization": f"Bearer {other}"})
    assert (r.status_code, r.json()["code"]) == (404, "op_not_found")

    # Funded and sent again, it is accepted: its page is the op's own.
    await harness.fund(op.sender, ETHER)
    r = await client.post(
        f"/rpc/{CHAIN}",
        headers=auth,
        json=rpc("eth_sendUserOperation", user_operation_json(op), ep),
    )
    assert r.json()["result"] == op_hash, r.text
    assert (await client.get(f"/v1/ops/{op_hash}", headers=auth)).json()["status"] == "pending"
    await bundler_rpc.dispatch(rpc("debug_bundler_sendBundleNow"))


async def test_an_unreadable_refused_op_keeps_no_hash(
    service: tuple[httpx.AsyncClient, Services],  # noqa: F811
) -> None:
    client, services = service
    pid, key = await tenant(services, PlanName.FREE, [CHAIN])
    r = await client.post(
        f"/rpc/{CHAIN}",
        headers={"Authorization": f"Bearer {key}"},
        json=rpc("eth_sendUserOperation", {"sender": "0x12"}, "0x" + "00" * 20),
    )
    assert "error" in r.json()
    assert services.request_log is not None
    await services.request_log.flush()
    records = RequestLogRecords(services.store.engine)
    logged = await records.page(pid, LogFilter(method=SEND), before=None, limit=5)
    assert [(c.outcome, c.user_op_hash) for c in logged] == [("error", None)]
