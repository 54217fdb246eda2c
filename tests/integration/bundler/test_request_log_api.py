"""The request log through the API, on a real devnet: a refused op is answered with a plain
explanation in `data.explanation`, and the same text is found in `GET /v1/requests` with the
op's sender and nonce; REST calls are logged by route; another project sees none of it; only
the key's prefix is kept."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx

from entryway.bundler.rpc_types import user_operation_json
from entryway.domain.apikeys import KeyEnvironment, KeyRole
from entryway.domain.plans import PlanName
from entryway.service.services import Services
from tests.integration.bundler.test_service_chain_routes import CHAIN, rpc, service, tenant
from tests.integration.harness import Harness

__all__ = ["service"]  # the fixture


async def admin_key(services: Services, project_id: str) -> str:
    now = datetime.now(UTC)
    key = await services.store.issue_key(
        project_id, KeyEnvironment.TEST, [CHAIN], now, role=KeyRole.ADMIN
    )
    return key.secret


async def logged(client: httpx.AsyncClient, services: Services, key: str, query: str) -> Any:
    assert services.request_log is not None
    await services.request_log.flush()
    r = await client.get(f"/v1/requests?{query}", headers={"Authorization": f"Bearer {key}"})
    assert r.status_code == 200, r.text
    return r.json()


async def test_a_refused_op_is_explained_and_found_in_the_log(
    service: tuple[httpx.AsyncClient, Services], harness: Harness
) -> None:
    client, services = service
    pid, key = await tenant(services, PlanName.FREE, [CHAIN])
    admin = await admin_key(services, pid)
    payer = harness.new_key()
    op = harness.sign(await harness.build_op(payer.address, b""), payer)  # unfunded: AA21
    send = rpc("eth_sendUserOperation", user_operation_json(op), harness.deployment.entry_point)
    r = await client.post(f"/rpc/{CHAIN}", headers={"Authorization": f"Bearer {key}"}, json=send)
    error = r.json()["error"]
    assert "AA21" in error["message"]
    explanation = error["data"]["explanation"]
    assert explanation.startswith("AA21: ") and "Fix: fund the account" in explanation
    await client.post(
        f"/rpc/{CHAIN}", headers={"Authorization": f"Bearer {key}"}, json=rpc("eth_chainId")
    )

    page = await logged(client, services, admin, f"outcome=error&sender={op.sender}")
    (entry,) = page["requests"]
    assert entry["method"] == "rpc:eth_sendUserOperation"
    assert entry["rpcCode"] == error["code"] and entry["message"] == error["message"]
    assert entry["explanation"] == explanation
    assert entry["sender"] == op.sender.lower() and int(entry["nonce"], 16) == op.nonce
    assert entry["chainId"] == CHAIN and entry["httpStatus"] == 200
    assert f"_{entry['keyPrefix']}_" in key  # the key id of its prefix, never the secret

    everything = await logged(client, services, admin, "limit=200")
    methods = [e["method"] for e in everything["requests"]]
    assert methods[:3] == ["GET /v1/requests", "rpc:eth_chainId", "rpc:eth_sendUserOperation"]
    assert all(e["outcome"] == "ok" for e in everything["requests"][:2])
    assert key not in str(everything) and admin not in str(everything)


async def test_another_project_sees_none_of_the_log_and_bad_queries_are_refused(
    service: tuple[httpx.AsyncClient, Services],
) -> None:
    client, services = service
    pid, key = await tenant(services, PlanName.FREE, [CHAIN])
    other_pid, _ = await tenant(services, PlanName.PRO, [CHAIN])
    other_admin = await admin_key(services, other_pid)
    for _ in range(3):
        await client.post(
            f"/rpc/{CHAIN}", headers={"Authorization": f"Bearer {key}"}, json=rpc("eth_chainId")
        )
    page = await logged(client, services, other_admin, "")
    assert page == {"requests": [], "nextCursor": None}

    own_admin = await admin_key(services, pid)
    first = await logged(client, services, own_admin, "limit=2&method=rpc:eth_chainId")
    assert len(first["requests"]) == 2 and first["nextCursor"]
    rest = await logged(client, services, own_admin, f"limit=2&cursor={first['nextCursor']}")
    assert [e["method"] for e in rest["requests"]] == ["rpc:eth_chainId"]
    assert rest["nextCursor"] is None

    # A request refused before any call ran (a chain the key may not use) is logged too.
    refused = await client.post(
        "/rpc/8453", headers={"Authorization": f"Bearer {key}"}, json=rpc("eth_chainId")
    )
    assert refused.status_code == 403
    page = await logged(client, services, own_admin, "chainId=8453")
    (entry,) = page["requests"]
    assert entry["method"] == "POST /rpc/{chain_id}" and entry["outcome"] == "error"
    assert entry["httpStatus"] == 403 and entry["message"].startswith("chain_not_recognised: ")

    auth = {"Authorization": f"Bearer {own_admin}"}
    bad = await client.get("/v1/requests?cursor=abc", headers=auth)
    assert bad.status_code == 422 and bad.json()["code"] == "invalid_cursor"
    service_key_denied = await client.get(
        "/v1/requests", headers={"Authorization": f"Bearer {key}"}
    )
    assert service_key_denied.status_code == 403
