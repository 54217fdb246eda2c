"""API keys with names and allowlists: a key limited to origins or client addresses is
refused at the edge elsewhere (403 problem+json, `origin_not_allowed`, `client_not_allowed`),
before it touches anything; entries are checked and kept in canonical form; an empty list
allows everything again."""

from __future__ import annotations

import httpx

from tests.integration.api.conftest import Api

APP = "https://app.example.com"


def refused(r: httpx.Response, code: str, status: int = 403) -> str:
    assert (r.status_code, r.headers["content-type"]) == (status, "application/problem+json")
    assert r.json()["code"] == code, r.text
    return str(r.json()["detail"])


async def test_a_key_limited_to_origins_and_client_addresses_is_refused_elsewhere(
    api: Api,
) -> None:
    r = await api.client.post(
        "/v1/keys",
        headers=api.auth(),
        json={
            "chains": [80002],
            "name": "  Web app  ",
            "allowedOrigins": ["HTTPS://App.Example.com/", APP],
            "allowedClientAddresses": ["10.1.2.3/8"],
        },
    )
    assert r.status_code == 201, r.text
    made = r.json()
    assert (made["name"], made["allowedOrigins"], made["allowedClientAddresses"]) == (
        "Web app",
        [APP],
        ["10.0.0.0/8"],
    )
    key, key_id = made["apiKey"], made["keyId"]
    as_key = {"Authorization": f"Bearer {key}"}

    # No Origin, or another one: refused, whatever the route.
    detail = refused(await api.client.get("/v1/credits", headers=as_key), "origin_not_allowed")
    assert "no Origin" in detail
    evil = {**as_key, "Origin": "https://evil.example.com"}
    assert "evil.example.com" in refused(
        await api.client.get("/v1/credits", headers=evil), "origin_not_allowed"
    )
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}
    refused(await api.client.post("/rpc/80002", headers=evil, json=rpc), "origin_not_allowed")
    # The right origin from a client address off the list (the test client is 127.0.0.1).
    from_app = {**as_key, "Origin": APP}
    assert "127.0.0.1" in refused(
        await api.client.get("/v1/credits", headers=from_app), "client_not_allowed"
    )

    # Listing the client's network lets it through; the origin list stays as it was.
    r = await api.client.patch(
        f"/v1/keys/{key_id}", headers=api.auth(), json={"allowedClientAddresses": ["127.0.0.1"]}
    )
    assert r.status_code == 200, r.text
    assert (r.json()["allowedOrigins"], r.json()["allowedClientAddresses"]) == (
        [APP],
        ["127.0.0.1/32"],
    )
    assert (await api.client.get("/v1/credits", headers=from_app)).status_code == 200
    refused(await api.client.get("/v1/credits", headers=as_key), "origin_not_allowed")

    # Empty lists allow everything again; the name can be changed.
    r = await api.client.patch(
        f"/v1/keys/{key_id}",
        headers=api.auth(),
        json={"allowedOrigins": [], "allowedClientAddresses": [], "name": "Backend"},
    )
    assert r.json()["name"] == "Backend" and r.json()["allowedOrigins"] == []
    assert (await api.client.get("/v1/credits", headers=as_key)).status_code == 200
    listed = (await api.client.get("/v1/keys", headers=api.auth())).json()
    assert [k["name"] for k in listed if k["keyId"] == key_id] == ["Backend"]


async def test_entries_that_are_not_origins_or_addresses_are_refused_and_issue_nothing(
    api: Api,
) -> None:
    before = len(await api.services.store.keys(api.project_id))
    for body, fragment in (
        ({"allowedOrigins": ["app.example.com"]}, "not an origin"),
        ({"allowedOrigins": ["https://app.example.com/path"]}, "no path"),
        ({"allowedClientAddresses": ["10.0.0.300"]}, "not an IP address"),
    ):
        r = await api.client.post("/v1/keys", headers=api.auth(), json={"chains": [80002], **body})
        assert fragment in refused(r, "invalid_allowlist", 422)
    assert len(await api.services.store.keys(api.project_id)) == before
