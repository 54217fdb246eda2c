"""Bounds on what the REST API takes from outside, on SQLite and PostgreSQL: dates within the
accepted years and `since` before `until`; names without control characters; integers that
are JSON numbers in range (never `true`, `80002.0` or `"80002"`); a purchase id reused for
another purchase refused with 409; /v1/credits answering at the extremes the API allows."""

from __future__ import annotations

from typing import Any

import httpx

from entryway.domain.bounds import MAX_CREDITS
from entryway.notary.service import Notary
from entryway.storage.notary import NotaryStore
from tests.integration.api.conftest import ADMIN_TOKEN, Api

PROBLEM = "application/problem+json"
OPERATOR = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def refused(r: httpx.Response, code: str = "validation_error", status: int = 422) -> str:
    """The problem's detail, once its status, type and code are the expected ones."""
    assert (r.status_code, r.headers["content-type"]) == (status, PROBLEM), r.text
    assert r.json()["code"] == code, r.text
    return str(r.json()["detail"])


async def test_dates_outside_the_accepted_years_are_problems_not_crashes(api: Api) -> None:
    outside = [
        {"until": "0001-01-01T00:00:00Z"},
        {"since": "0001-01-01T00:00:00+01:00"},  # before year 1 once in UTC
        {"since": "1999-12-31T23:59:59Z"},
        {"until": "9999-06-01T00:00:00Z"},
    ]
    for path in ("/v1/usage/export", "/v1/usage"):
        for query in outside:
            detail = refused(await api.client.get(path, params=query, headers=api.auth()))
            (field,) = query
            assert f"query.{field}" in detail and "from 2000-01-01 to before 9999-01-01" in detail
    backwards = {"since": "2026-02-01T00:00:00Z", "until": "2026-01-01T00:00:00Z"}
    r = await api.client.get("/v1/usage/export", params=backwards, headers=api.auth())
    assert refused(r) == "since must be before until"

    naive = {"since": "2026-01-01T00:00:00", "until": "2026-01-02T02:00:00+02:00"}
    r = await api.client.get("/v1/usage", params=naive, headers=api.auth())
    assert r.status_code == 200, r.text
    assert (r.json()["since"], r.json()["until"]) == (
        "2026-01-01T00:00:00Z",
        "2026-01-02T00:00:00Z",
    )


async def test_names_refuse_control_characters_and_keep_their_length_bounds(api: Api) -> None:
    for name in ("Acme\x00", "two\nlines", "\u202eevil.exe", "   ", "x" * 201):
        r = await api.client.patch("/v1/project", json={"name": name}, headers=api.auth())
        assert "body.name" in refused(r)
        r = await api.client.post("/v1/policies", json={"name": name}, headers=api.auth())
        assert "body.name" in refused(r)
        create = {"email": "a@example.org", "name": name, "chains": [80002]}
        r = await api.client.post("/v1/admin/projects", json=create, headers=OPERATOR)
        assert "body.name" in refused(r)
    assert (await api.client.get("/v1/project", headers=api.auth())).json()["name"] == "tenant"
    assert (await api.client.get("/v1/policies", headers=api.auth())).json()["policies"] == []

    r = await api.client.patch("/v1/project", json={"name": "Café ☕ 東京"}, headers=api.auth())
    assert r.status_code == 200 and r.json()["name"] == "Café ☕ 東京"
    for rules, complaint in (
        ({"sponsor": {"name": "Game\x00Co"}}, "sponsor.name holds a control"),
        ({"startsAt": "0001-01-01T00:00:00Z"}, "startsAt must be from 2000-01-01"),
        ({"spendCap": {"credits": 2**63}}, "spendCap.credits must be a non-negative integer"),
    ):
        body = {"name": "capped", "rules": rules}
        r = await api.client.post("/v1/policies", json=body, headers=api.auth())
        assert complaint in refused(r, "invalid_policy_rules")


async def test_integers_from_outside_are_json_numbers_in_their_range(api: Api) -> None:
    api.services.notary = Notary(NotaryStore(api.services.store.engine), [80002])
    good: dict[str, Any] = {"documentHash": "0x" + "ab" * 32, "chainId": 80002}
    for chain_id in (True, 80002.0, "80002", 0, -1, 2**53 + 1):
        r = await api.client.post(
            "/v1/notarizations", json={**good, "chainId": chain_id}, headers=api.auth()
        )
        assert "body.chainId" in refused(r)
    r = await api.client.post("/v1/notarizations", json=good, headers=api.auth())
    assert r.status_code == 202 and r.json()["chainId"] == 80002
    recovery = {"account": "0x" + "11" * 20, "newOwner": "0x" + "22" * 20}
    for chain_id in (True, 80002.0):
        r = await api.client.post(
            "/v1/recoveries", json={**recovery, "chainId": chain_id}, headers=api.auth()
        )
        assert "body.chainId" in refused(r)

    for chains in ([True], [80002.0], ["80002"]):
        r = await api.client.post("/v1/keys", json={"chains": chains}, headers=api.auth())
        assert "body.chains.0" in refused(r)
    for patch in ({"lowBalanceCredits": True}, {"lowBalanceCredits": 5.0},
                  {"lowBalanceCredits": MAX_CREDITS + 1}, {"aaModuleEnabled": 1},
                  {"chains": [True]}):  # fmt: skip
        r = await api.client.patch("/v1/project", json=patch, headers=api.auth())
        refused(r)
    r = await api.client.post(
        "/v1/policies", json={"name": "p", "active": "yes"}, headers=api.auth()
    )
    assert "body.active" in refused(r)
    url = f"/v1/admin/projects/{api.project_id}/purchases"
    for credits in (True, 5.0, "5", 0, 10**12 + 1):
        r = await api.client.post(
            url, json={"purchaseId": "p-1", "credits": credits}, headers=OPERATOR
        )
        assert "body.credits" in refused(r)

    # The largest threshold the API takes is still served.
    r = await api.client.patch(
        "/v1/project", json={"lowBalanceCredits": MAX_CREDITS}, headers=api.auth()
    )
    assert r.status_code == 200
    r = await api.client.get("/v1/credits", headers=api.auth())
    assert r.status_code == 200 and r.json()["lowBalanceThreshold"] == MAX_CREDITS


async def test_a_reused_purchase_id_is_refused_unless_it_is_the_same_purchase(api: Api) -> None:
    url = f"/v1/admin/projects/{api.project_id}/purchases"
    purchase = {"purchaseId": "inv-2026-0042", "credits": 1_000}
    first = await api.client.post(url, json=purchase, headers=OPERATOR)
    again = await api.client.post(url, json=purchase, headers=OPERATOR)
    assert (first.status_code, again.status_code) == (201, 201)
    assert (first.json()["created"], again.json()["created"]) == (True, False)
    assert first.json()["lotId"] == again.json()["lotId"] == "purchase-inv-2026-0042"

    dearer = await api.client.post(url, json={**purchase, "credits": 2_000}, headers=OPERATOR)
    assert "inv-2026-0042" in refused(dearer, "idempotency_key_reused", 409)
    other_project, other_key = await api.new_project()
    elsewhere = f"/v1/admin/projects/{other_project}/purchases"
    refused(
        await api.client.post(elsewhere, json=purchase, headers=OPERATOR),
        "idempotency_key_reused",
        409,
    )
    mine = (await api.client.get("/v1/credits", headers=api.auth())).json()
    theirs = (await api.client.get("/v1/credits", headers=api.auth(other_key))).json()
    assert (mine["balance"], theirs["balance"]) == (1_001_000, 1_000_000)
