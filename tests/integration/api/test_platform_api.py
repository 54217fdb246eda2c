"""The platform's REST API: problem+json errors with stable codes, the caller's project and
keys (and nothing of another project's), plans and plan changes, credits, usage and exports,
operator routes."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta

from entryway.domain.plans import PlanName
from tests.integration.api.conftest import ADMIN_TOKEN, Api

PROBLEM = "application/problem+json"


async def test_missing_or_bad_keys_get_a_problem_with_a_stable_code(api: Api) -> None:
    for headers in ({}, {"Authorization": "Bearer nope"}, api.auth(api.key[:-1] + "x")):
        r = await api.client.get("/v1/project", headers=headers)
        assert r.status_code == 401, r.text
        assert r.headers["content-type"] == PROBLEM
        body = r.json()
        assert body["code"] == "invalid_api_key" and body["status"] == 401
        assert r.headers["WWW-Authenticate"] == "Bearer"
    r = await api.client.get("/v1/nowhere", headers=api.auth())
    assert (r.status_code, r.json()["code"]) == (404, "not_found")


async def test_validation_errors_are_problems_naming_the_field(api: Api) -> None:
    r = await api.client.post("/v1/keys", headers=api.auth(), json={"chains": []})
    assert r.status_code == 422 and r.headers["content-type"] == PROBLEM
    assert r.json()["code"] == "validation_error" and "chains" in r.json()["detail"]
    r = await api.client.post("/v1/keys", headers=api.auth(), json={"chains": [1]})
    assert r.status_code == 422 and "[1]" in r.json()["detail"]
    r = await api.client.get("/v1/usage?groupBy=colour", headers=api.auth())
    assert r.json()["code"] == "validation_error"
    assert r.headers["Entryway-API-Version"] == "v1"


async def test_project_settings_round_trip(api: Api) -> None:
    r = await api.client.get("/v1/project", headers=api.auth())
    assert r.status_code == 200
    body = r.json()
    assert (body["projectId"], body["plan"], body["chains"]) == (
        api.project_id,
        "FREE",
        [80002, 84532],
    )
    patch = {"name": "Shop", "chains": [84532], "aaModuleEnabled": False, "lowBalanceCredits": 9}
    r = await api.client.patch("/v1/project", headers=api.auth(), json=patch)
    assert r.status_code == 200, r.text
    assert {k: r.json()[k] for k in patch} == patch
    r = await api.client.patch("/v1/project", headers=api.auth(), json={"owner": "me"})
    assert r.status_code == 422  # unknown fields are refused, not ignored
    r = await api.client.patch("/v1/project", headers=api.auth(), json={"chains": []})
    assert r.status_code == 422 and "chains" in r.json()["detail"]  # one chain at least
    assert (await api.client.get("/v1/project", headers=api.auth())).json()["chains"] == [84532]


async def test_an_op_looked_up_on_a_chain_outside_the_keys_is_an_unrecognised_chain(
    api: Api,
) -> None:
    r = await api.client.post("/v1/keys", headers=api.auth(), json={"chains": [80002]})
    key = r.json()["apiKey"]
    op_hash = "0x" + "ab" * 32
    for chain_id in (84532, 137):  # the project's but not the key's; neither's
        r = await api.client.get(f"/v1/ops/{op_hash}?chainId={chain_id}", headers=api.auth(key))
        assert r.status_code == 403, r.text
        assert r.json()["code"] == "chain_not_recognised"
    r = await api.client.get(f"/v1/ops/{op_hash}?chainId=80002", headers=api.auth(key))
    assert (r.status_code, r.json()["code"]) == (404, "op_not_found")


async def test_keys_are_shown_once_scoped_and_revocable(api: Api) -> None:
    r = await api.client.post(
        "/v1/keys", headers=api.auth(), json={"chains": [80002], "environment": "live"}
    )
    assert r.status_code == 201, r.text
    created = r.json()
    assert created["apiKey"].startswith("ew_live_") and created["chains"] == [80002]
    listed = (await api.client.get("/v1/keys", headers=api.auth())).json()
    assert {k["keyId"] for k in listed} >= {created["keyId"]}
    assert all("apiKey" not in k for k in listed)  # the secret is never shown again

    r = await api.client.patch(
        f"/v1/keys/{created['keyId']}", headers=api.auth(), json={"chains": [80002, 84532]}
    )
    assert r.json()["chains"] == [80002, 84532]
    assert (await api.client.get("/v1/project", headers=api.auth(created["apiKey"]))).is_success
    r = await api.client.delete(f"/v1/keys/{created['keyId']}", headers=api.auth())
    assert r.status_code == 204
    r = await api.client.get("/v1/project", headers=api.auth(created["apiKey"]))
    assert r.status_code == 401


async def test_another_projects_key_sees_nothing_of_this_one(api: Api) -> None:
    other_pid, other_key = await api.new_project()
    mine = (await api.client.get("/v1/keys", headers=api.auth())).json()
    theirs = (await api.client.get("/v1/keys", headers=api.auth(other_key))).json()
    assert {k["keyId"] for k in mine}.isdisjoint({k["keyId"] for k in theirs})
    their_key_id = theirs[0]["keyId"]
    for method, body in (("DELETE", None), ("PATCH", {"chains": [80002]})):
        r = await api.client.request(
            method, f"/v1/keys/{their_key_id}", headers=api.auth(), json=body
        )
        assert (r.status_code, r.json()["code"]) == (404, "key_not_found")
    assert (await api.client.get("/v1/project", headers=api.auth(other_key))).is_success
    project = (await api.client.get("/v1/project", headers=api.auth(other_key))).json()
    assert project["projectId"] == other_pid != api.project_id


async def test_plan_changes_wait_for_the_next_cycle(api: Api) -> None:
    plans = (await api.client.get("/v1/plans", headers=api.auth())).json()
    assert [(p["name"], p["monthlyPriceMicroEur"], p["monthlyCredits"]) for p in plans] == [
        ("FREE", 0, 1_000_000),
        ("STARTER", 5_000_000, 5_000_000),
        ("PRO", 20_000_000, 20_000_000),
        ("SCALE", 50_000_000, 50_000_000),
        ("ENTERPRISE", None, None),
    ]
    # A dearer plan waits for the operator (tests/integration/api/test_approvals_api.py).
    r = await api.client.put("/v1/project/plan", headers=api.auth(), json={"plan": "PRO"})
    assert r.status_code == 202 and r.json()["status"] == "pending"
    await api.services.store.schedule_plan_change(api.project_id, PlanName.PRO)  # approved
    r = await api.client.put("/v1/project/plan", headers=api.auth(), json={"plan": "FREE"})
    assert r.status_code == 200
    assert (r.json()["plan"], r.json()["nextPlan"]) == ("FREE", None)  # cancelled


async def test_credits_usage_and_exports_follow_the_ledger(api: Api) -> None:
    ledger = api.services.store.ledger
    now = datetime.now(UTC)
    await ledger.record_usage(api.project_id, "n-1", "notarization", 600, now)
    r = await api.client.get("/v1/credits", headers=api.auth())
    credits = r.json()
    assert (credits["balance"], credits["usedThisCycle"], credits["monthlyCredits"]) == (
        999_400,
        600,
        1_000_000,
    )
    assert credits["lowBalanceThreshold"] == 100_000
    assert [lot["remaining"] for lot in credits["lots"]] == [999_400]
    # A project a moment old: its one use spread over one day, not over seconds.
    basis = credits["forecastBasis"]
    assert (basis["days"], basis["credits"], basis["creditsPerDay"]) == (1.0, 600, 600)
    assert basis["method"] == "daily_average" and basis["windowStart"] <= basis["windowEnd"]
    assert 600 <= credits["forecastCycleUsage"] <= 600 * 32

    usage = (await api.client.get("/v1/usage?groupBy=operation", headers=api.auth())).json()
    assert usage["groups"]["notarization"] == {"credits": 600, "operations": 1, "requests": 0}
    assert usage["groups"]["read"]["requests"] >= 1  # /v1/credits was counted
    assert usage["totalCredits"] == 600

    r = await api.client.get("/v1/usage/export?format=csv", headers=api.auth())
    assert r.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert [(x["idempotencyKey"], x["credits"]) for x in rows] == [("n-1", "600")]
    r = await api.client.get("/v1/usage/export?format=json", headers=api.auth())
    assert [e["operation"] for e in r.json()] == ["notarization"]
    since = (now + timedelta(days=1)).isoformat()
    r = await api.client.get(
        "/v1/usage/export", params={"format": "json", "since": since}, headers=api.auth()
    )
    assert r.status_code == 422  # since after until (now)

    _, other_key = await api.new_project()
    theirs = await api.client.get("/v1/usage/export?format=json", headers=api.auth(other_key))
    assert theirs.json() == []


async def test_alerts_fire_once_when_the_balance_runs_low(api: Api) -> None:
    who = await api.services.store.authenticate(api.key)
    quote_credits = 950_000
    from entryway.domain.pricebook import OperationType, Quote

    quote = Quote.of(OperationType.NOTARIZATION, service=quote_credits)
    meter = api.services.platform.meter
    await meter.charge(who, quote, "big-1", endpoint="test")
    await meter.charge(who, quote, "big-2", endpoint="test")  # into overage
    await meter.charge(who, quote, "big-2", endpoint="test")  # a retry: charged once
    alerts = (await api.client.get("/v1/alerts", headers=api.auth())).json()
    assert sorted(a["kind"] for a in alerts) == ["credits.low", "credits.overage"]
    credits = (await api.client.get("/v1/credits", headers=api.auth())).json()
    assert (credits["balance"], credits["overageThisCycle"]) == (0, 900_000)


async def test_operator_routes_need_the_operator_token(api: Api) -> None:
    body = {"email": "ops@example.org", "name": "Ops", "plan": "STARTER", "chains": [137]}
    r = await api.client.post("/v1/admin/projects", json=body, headers=api.auth())
    assert (r.status_code, r.json()["code"]) == (401, "invalid_admin_token")
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    r = await api.client.post("/v1/admin/projects", json=body, headers=admin)
    assert r.status_code == 201, r.text
    created = r.json()
    project = (await api.client.get("/v1/project", headers=api.auth(created["apiKey"]))).json()
    assert (project["plan"], project["chains"]) == ("STARTER", [137])

    purchase = {"purchaseId": "inv-2026-0001", "credits": 2_000_000}
    url = f"/v1/admin/projects/{created['projectId']}/purchases"
    first = (await api.client.post(url, json=purchase, headers=admin)).json()
    second = (await api.client.post(url, json=purchase, headers=admin)).json()
    assert (first["created"], second["created"]) == (True, False)
    credits = (await api.client.get("/v1/credits", headers=api.auth(created["apiKey"]))).json()
    assert credits["balance"] == 7_000_000
    r = await api.client.post("/v1/admin/projects/nope/purchases", json=purchase, headers=admin)
    assert r.json()["code"] == "project_not_found"
    r = await api.client.post("/v1/admin/billing/close-cycles", headers=admin)
    assert r.json() == {"invoices": [], "failedProjects": []}  # nothing has ended yet
    assert PlanName.STARTER.value == project["plan"]
