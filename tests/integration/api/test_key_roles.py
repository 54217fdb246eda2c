"""Key roles over the API: service keys use the service and are refused on every route that
administers the project; no key widens itself or manages a key wider than itself; a project
keeps an admin key, even under concurrent revocations; the operator issues keys to existing
projects; new secrets are never cached; `?apikey=` works on the JSON-RPC endpoint only."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from entryway.service.app import create_app
from entryway.service.services import Services
from tests.integration.api.conftest import ADMIN_TOKEN, Api

PROBLEM = "application/problem+json"
OPERATOR = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
# The writes a service key makes: it uses the service. Every other write, and every route
# under these prefixes (reads included), administers the project.
SERVICE_WRITES = {
    ("POST", "/rpc/{chain_id}"),
    ("POST", "/v1/notarizations"),
    ("POST", "/v1/notarizations/document"),
    ("POST", "/v1/notarizations/bulk"),
    ("POST", "/v1/recoveries"),
    ("POST", "/v1/recoveries/{recovery_id}/approvals"),
}
ADMIN_PREFIXES = ("/v1/keys", "/v1/policies", "/v1/webhooks", "/v1/requests")


def api_key_routes() -> list[tuple[str, str]]:
    """Every (method, path) of the app that takes an API key (not the operator's routes),
    as its OpenAPI document lists them: a route added later is walked too."""
    paths = create_app(Services()).openapi()["paths"]
    return sorted(
        (method.upper(), path)
        for path, operations in paths.items()
        if not path.startswith("/v1/admin") and path != "/healthz"
        for method in operations
    )


def needs_admin(method: str, path: str) -> bool:
    if path.startswith(ADMIN_PREFIXES):
        return True
    return method != "GET" and (method, path) not in SERVICE_WRITES


def concrete(path: str) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: "80002" if m[1] == "chain_id" else "nope", path)


async def call(api: Api, method: str, path: str, key: str) -> Any:
    body = None if method in ("GET", "DELETE") else {}
    return await api.client.request(method, concrete(path), headers=api.auth(key), json=body)


def test_the_route_walk_sees_the_admin_routes() -> None:
    routes = api_key_routes()
    admin = {r for r in routes if needs_admin(*r)}
    assert {("PATCH", "/v1/project"), ("PUT", "/v1/project/plan"), ("GET", "/v1/keys")} <= admin
    assert ("POST", "/v1/webhooks/endpoints") in admin and ("GET", "/v1/policies") in admin
    assert set(routes) >= SERVICE_WRITES  # none renamed away unnoticed
    assert ("GET", "/v1/credits") in set(routes) - admin


async def test_service_keys_are_refused_on_every_admin_route_and_only_there(api: Api) -> None:
    service = await api.service_key()
    wrong = []
    for method, path in api_key_routes():
        as_service = await call(api, method, path, service)
        refused = as_service.status_code == 403 and (
            as_service.headers["content-type"] == PROBLEM
            and as_service.json()["code"] == "admin_key_required"
        )
        if refused != needs_admin(method, path):
            wrong.append((method, path, as_service.status_code, as_service.text[:120]))
        as_admin = await call(api, method, path, api.key)
        if as_admin.status_code in (401, 403) and "admin_key_required" in as_admin.text:
            wrong.append((method, path, "refused to the admin key"))
    assert wrong == []


async def test_keys_show_their_role_and_new_secrets_are_never_cached(api: Api) -> None:
    listed = (await api.client.get("/v1/keys", headers=api.auth())).json()
    assert [k["role"] for k in listed] == ["admin"]  # the project's first key
    r = await api.client.post("/v1/keys", headers=api.auth(), json={"chains": [80002]})
    assert r.status_code == 201, r.text
    assert r.json()["role"] == "service"  # the default: the key handed to apps
    assert (r.headers["Cache-Control"], r.headers["Pragma"]) == ("no-store", "no-cache")
    r = await api.client.post(
        "/v1/keys", headers=api.auth(), json={"chains": [80002], "role": "admin"}
    )
    assert r.json()["role"] == "admin"
    listed = (await api.client.get("/v1/keys", headers=api.auth())).json()
    assert sorted(k["role"] for k in listed) == ["admin", "admin", "service"]
    # a service key does its work: reads, credits, usage
    service = await api.service_key()
    for path in ("/v1/project", "/v1/credits", "/v1/usage", "/v1/plans"):
        assert (await api.client.get(path, headers=api.auth(service))).status_code == 200, path


async def test_a_key_cannot_widen_itself_nor_manage_a_wider_key(api: Api) -> None:
    r = await api.client.post(
        "/v1/keys", headers=api.auth(), json={"chains": [80002], "role": "admin"}
    )
    amoy_admin, amoy_id = r.json()["apiKey"], r.json()["keyId"]
    main_id = (await api.client.get("/v1/keys", headers=api.auth())).json()[0]["keyId"]

    for change in ({"chains": [80002, 84532]}, {"role": "service"}, {"chains": [80002]}):
        r = await api.client.patch(f"/v1/keys/{amoy_id}", headers=api.auth(amoy_admin), json=change)
        assert (r.status_code, r.json()["code"]) == (403, "own_key_change_refused"), change
    r = await api.client.post("/v1/keys", headers=api.auth(amoy_admin), json={"chains": [84532]})
    assert (r.status_code, r.json()["code"]) == (403, "key_chains_exceeded")
    r = await api.client.post(
        "/v1/keys", headers=api.auth(amoy_admin), json={"chains": [80002], "role": "admin"}
    )
    assert r.status_code == 201 and r.json()["chains"] == [80002]
    minted_id = r.json()["keyId"]
    r = await api.client.patch(
        f"/v1/keys/{minted_id}", headers=api.auth(amoy_admin), json={"chains": [80002, 84532]}
    )
    assert (r.status_code, r.json()["code"]) == (403, "key_chains_exceeded")
    r = await api.client.delete(f"/v1/keys/{main_id}", headers=api.auth(amoy_admin))
    assert (r.status_code, r.json()["code"]) == (403, "key_chains_exceeded")
    assert (await api.client.get("/v1/keys", headers=api.auth())).is_success  # main key lives

    # Even the widest key gives only the project's chains (137 is supported, not enabled).
    r = await api.client.post("/v1/keys", headers=api.auth(), json={"chains": [80002, 137]})
    assert (r.status_code, r.json()["code"]) == (422, "chains_not_in_project")
    assert "[137]" in r.json()["detail"]
    r = await api.client.patch(f"/v1/keys/{minted_id}", headers=api.auth(), json={"chains": [137]})
    assert (r.status_code, r.json()["code"]) == (422, "chains_not_in_project")
    keys = {k["keyId"]: k for k in (await api.client.get("/v1/keys", headers=api.auth())).json()}
    assert keys[amoy_id]["chains"] == keys[minted_id]["chains"] == [80002]
    assert keys[amoy_id]["role"] == "admin"


async def test_the_last_admin_key_can_be_neither_revoked_nor_demoted(api: Api) -> None:
    first_id = (await api.client.get("/v1/keys", headers=api.auth())).json()[0]["keyId"]
    r = await api.client.delete(f"/v1/keys/{first_id}", headers=api.auth())
    assert (r.status_code, r.headers["content-type"]) == (409, PROBLEM)
    assert r.json()["code"] == "last_admin_key"

    r = await api.client.post(
        "/v1/keys", headers=api.auth(), json={"chains": [80002, 84532], "role": "admin"}
    )
    second, second_id = r.json()["apiKey"], r.json()["keyId"]
    r = await api.client.patch(
        f"/v1/keys/{first_id}", headers=api.auth(second), json={"role": "service"}
    )
    assert r.status_code == 200 and r.json()["role"] == "service"
    r = await api.client.patch("/v1/project", headers=api.auth(), json={"name": "demoted"})
    assert r.json()["code"] == "admin_key_required"  # the demotion applies at once
    r = await api.client.delete(f"/v1/keys/{second_id}", headers=api.auth(second))
    assert r.json()["code"] == "last_admin_key"

    r = await api.client.patch(
        f"/v1/keys/{first_id}", headers=api.auth(second), json={"role": "admin"}
    )
    assert r.json()["role"] == "admin"
    r = await api.client.delete(f"/v1/keys/{second_id}", headers=api.auth(second))
    assert r.status_code == 204  # another admin key remains: a key may revoke itself
    assert (await api.client.get("/v1/keys", headers=api.auth(second))).status_code == 401


async def test_concurrent_revocations_of_the_last_two_admin_keys_leave_one(api: Api) -> None:
    for _ in range(3):
        pid, a = await api.new_project()
        r = await api.client.post(
            "/v1/keys", headers=api.auth(a), json={"chains": [80002, 84532], "role": "admin"}
        )
        b, b_id = r.json()["apiKey"], r.json()["keyId"]
        a_id = next(k.key_id for k in await api.services.store.keys(pid) if k.key_id != b_id)
        answers = await asyncio.gather(
            api.client.delete(f"/v1/keys/{b_id}", headers=api.auth(a)),
            api.client.delete(f"/v1/keys/{a_id}", headers=api.auth(b)),
        )
        # One revocation wins; the other is refused as the last admin key, or, when its
        # request authenticates after the first commits, as a revoked key.
        statuses = sorted(r.status_code for r in answers)
        assert statuses in ([204, 401], [204, 409]), [r.text for r in answers]
        assert {r.json()["code"] for r in answers if r.status_code != 204} <= {
            "last_admin_key",
            "invalid_api_key",
        }
        active = [k for k in await api.services.store.keys(pid) if k.revoked_at is None]
        assert [k.role.value for k in active] == ["admin"]


async def test_the_operator_issues_a_key_to_an_existing_project(api: Api) -> None:
    # A project whose admin keys are gone (here: it only ever had a service key).
    pid, _ = await api.new_project(chains=(80002,))
    locked_out = await api.service_key(chains=(80002,), project_id=pid)
    r = await api.client.patch("/v1/project", headers=api.auth(locked_out), json={"name": "x"})
    assert r.json()["code"] == "admin_key_required"

    url = f"/v1/admin/projects/{pid}/keys"
    r = await api.client.post(url, headers=api.auth(), json={"chains": [80002], "role": "admin"})
    assert (r.status_code, r.json()["code"]) == (401, "invalid_admin_token")  # an API key
    r = await api.client.post(url, headers=OPERATOR, json={"chains": [80002], "role": "admin"})
    assert r.status_code == 201, r.text
    issued = r.json()
    assert (issued["role"], issued["chains"], issued["environment"]) == ("admin", [80002], "test")
    assert (r.headers["Cache-Control"], r.headers["Pragma"]) == ("no-store", "no-cache")
    r = await api.client.patch(
        "/v1/project", headers=api.auth(issued["apiKey"]), json={"name": "recovered"}
    )
    assert r.status_code == 200 and r.json()["name"] == "recovered"

    r = await api.client.post(url, headers=OPERATOR, json={"chains": [80002]})
    assert r.json()["role"] == "service"
    r = await api.client.post(url, headers=OPERATOR, json={"chains": [84532]})
    assert (r.status_code, r.json()["code"]) == (422, "chains_not_in_project")
    r = await api.client.post(
        "/v1/admin/projects/nope/keys", headers=OPERATOR, json={"chains": [80002]}
    )
    assert (r.status_code, r.json()["code"]) == (404, "project_not_found")


async def test_a_new_projects_first_key_is_an_uncached_admin_key(api: Api) -> None:
    body = {"email": "first@example.org", "name": "First", "chains": [80002]}
    r = await api.client.post("/v1/admin/projects", headers=OPERATOR, json=body)
    assert r.status_code == 201 and r.json()["role"] == "admin"
    assert r.headers["Cache-Control"] == "no-store"
    keys = await api.client.get("/v1/keys", headers=api.auth(r.json()["apiKey"]))
    assert [(k["keyId"], k["role"]) for k in keys.json()] == [(r.json()["keyId"], "admin")]


async def test_the_apikey_query_parameter_is_accepted_by_json_rpc_only(api: Api) -> None:
    r = await api.client.get("/v1/project", params={"apikey": api.key})
    assert (r.status_code, r.json()["code"]) == (401, "invalid_api_key")
    assert "/rpc/" in r.json()["detail"]
    r = await api.client.get("/v1/credits", params={"apikey": api.key})
    assert r.status_code == 401
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}
    r = await api.client.post("/rpc/80002", params={"apikey": api.key}, json=rpc)
    # authenticated: refused only further on, because this in-process API has no chain node
    assert (r.status_code, r.json()["code"]) == (503, "network_connection_problem")
    r = await api.client.post("/rpc/80002", json=rpc)
    assert (r.status_code, r.json()["code"]) == (401, "invalid_api_key")
    assert (await api.client.get("/v1/project", headers=api.auth())).status_code == 200


@pytest.mark.parametrize("role", ["service", "admin"])
async def test_a_key_sees_only_its_own_project_whatever_its_role(api: Api, role: str) -> None:
    other_pid, other_admin = await api.new_project()
    r = await api.client.post(
        "/v1/keys", headers=api.auth(other_admin), json={"chains": [80002], "role": role}
    )
    other_id = r.json()["keyId"]
    for method, body in (("DELETE", None), ("PATCH", {"role": "admin"})):
        r = await api.client.request(method, f"/v1/keys/{other_id}", headers=api.auth(), json=body)
        assert (r.status_code, r.json()["code"]) == (404, "key_not_found")
    roles = {k.key_id: k.role.value for k in await api.services.store.keys(other_pid)}
    assert roles[other_id] == role
