"""A project key alone never raises its bill: a dearer plan waits for the
operator, who approves or rejects it over the admin API; ENTERPRISE terms per project."""

from __future__ import annotations

from entryway.domain.approvals import ApprovalStatus
from entryway.domain.billing import EnterpriseTerms
from entryway.domain.plans import PlanName
from entryway.storage.approvals import Approvals
from tests.integration.api.conftest import ADMIN_TOKEN, Api

OPERATOR = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


async def test_a_paid_plan_asked_with_a_key_waits_for_the_operator(api: Api) -> None:
    pid, key = await api.new_project()
    for paid in ("STARTER", "ENTERPRISE", "PRO"):
        r = await api.client.put("/v1/project/plan", headers=api.auth(key), json={"plan": paid})
        assert r.status_code == 202, r.text
        asked = r.json()
        assert (asked["status"], asked["plan"], asked["kind"]) == ("pending", paid, "plan_change")
        project = (await api.client.get("/v1/project", headers=api.auth(key))).json()
        assert (project["plan"], project["nextPlan"]) == ("FREE", None)

    pending = (await api.client.get("/v1/admin/approvals", headers=OPERATOR)).json()
    mine = [a for a in pending if a["projectId"] == pid]
    assert [a["plan"] for a in mine] == ["PRO"]  # each request replaced the one before
    assert mine[0]["requestedBy"].startswith("key:")
    assert (await api.client.get("/v1/admin/approvals", headers=api.auth(key))).status_code == 401

    url = f"/v1/admin/approvals/{mine[0]['approvalId']}"
    r = await api.client.post(f"{url}/approve", headers=OPERATOR)
    assert r.status_code == 200 and r.json()["status"] == "approved"
    project = (await api.client.get("/v1/project", headers=api.auth(key))).json()
    assert (project["plan"], project["nextPlan"]) == ("FREE", "PRO")  # from the next cycle
    assert (await api.client.post(f"{url}/approve", headers=OPERATOR)).status_code == 200
    r = await api.client.post(f"{url}/reject", headers=OPERATOR)
    assert r.status_code == 409 and r.json()["code"] == "approval_decided"
    decided = (await api.client.get("/v1/admin/approvals?status=approved", headers=OPERATOR)).json()
    assert mine[0]["approvalId"] in [a["approvalId"] for a in decided]

    # Cancelling (asking for the current plan) needs no approval.
    r = await api.client.put("/v1/project/plan", headers=api.auth(key), json={"plan": "FREE"})
    assert r.status_code == 200 and r.json()["nextPlan"] is None


async def test_a_rejected_plan_change_changes_nothing(api: Api) -> None:
    pid, key = await api.new_project()
    r = await api.client.put("/v1/project/plan", headers=api.auth(key), json={"plan": "SCALE"})
    url = f"/v1/admin/approvals/{r.json()['approvalId']}"
    r = await api.client.post(f"{url}/reject", headers=OPERATOR, json={"note": "unpaid"})
    assert (r.json()["status"], r.json()["note"]) == ("rejected", "unpaid")
    assert (await api.services.store.project(pid)).next_plan is None
    r = await api.client.post(f"{url}/approve", headers=OPERATOR)
    assert r.status_code == 409
    assert (await api.services.store.project(pid)).next_plan is None
    r = await api.client.post("/v1/admin/approvals/not-an-id/approve", headers=OPERATOR)
    assert r.status_code == 404 and r.json()["code"] == "approval_not_found"


async def test_the_operator_sets_a_projects_enterprise_terms(api: Api) -> None:
    pid, key = await api.new_project(PlanName.ENTERPRISE)
    body = {"monthlyMicroEur": 1_500_000_000, "monthlyCredits": 2_000_000_000}
    url = f"/v1/admin/projects/{pid}/enterprise-terms"
    r = await api.client.put(url, headers=OPERATOR, json=body)
    assert r.status_code == 200 and r.json()["monthlyCredits"] == 2_000_000_000
    terms = (await api.services.store.project(pid)).enterprise_terms
    assert terms == EnterpriseTerms(1_500_000_000, 2_000_000_000)
    credits = (await api.client.get("/v1/credits", headers=api.auth(key))).json()
    assert (credits["monthlyCredits"], credits["lowBalanceThreshold"]) == (
        2_000_000_000,
        200_000_000,
    )
    r = await api.client.put("/v1/admin/projects/nope/enterprise-terms", headers=OPERATOR, json={})
    assert r.status_code == 404
    r = await api.client.put(url, headers=OPERATOR, json={"monthlyCredits": -1})
    assert r.status_code == 422


async def test_a_move_that_lowers_the_bill_is_scheduled_at_once_with_who_made_it(
    api: Api,
) -> None:
    pid, key = await api.new_project(PlanName.SCALE)
    # Asking for a dearer plan waits; a cheaper one then takes its place without approval.
    r = await api.client.put("/v1/project/plan", headers=api.auth(key), json={"plan": "ENTERPRISE"})
    assert r.status_code == 202 and r.json()["status"] == "pending"
    r = await api.client.put("/v1/project/plan", headers=api.auth(key), json={"plan": "PRO"})
    assert r.status_code == 200, r.text
    assert (r.json()["plan"], r.json()["nextPlan"]) == ("SCALE", "PRO")  # from the next cycle
    pending = (await api.client.get("/v1/admin/approvals", headers=OPERATOR)).json()
    assert [a for a in pending if a["projectId"] == pid] == []  # the ENTERPRISE request lapsed
    store = api.services.store
    newest = (await Approvals(store.engine, store.ledger).for_project(pid))[0]
    assert (newest.status, newest.subject) == (ApprovalStatus.DIRECT, "PRO")
    assert newest.requested_by.startswith("key:")  # the billing page shows who changed it
    # Back up to SCALE, the current plan: that cancels the scheduled change, no approval.
    r = await api.client.put("/v1/project/plan", headers=api.auth(key), json={"plan": "SCALE"})
    assert r.status_code == 200 and r.json()["nextPlan"] is None

    # From ENTERPRISE (priced by contract) to any listed plan lowers the bill.
    pid, key = await api.new_project(PlanName.ENTERPRISE)
    r = await api.client.put("/v1/project/plan", headers=api.auth(key), json={"plan": "SCALE"})
    assert r.status_code == 200 and r.json()["nextPlan"] == "SCALE"
    # A move that raises the bill still waits: nothing is scheduled until the operator says.
    pid, key = await api.new_project(PlanName.STARTER)
    r = await api.client.put("/v1/project/plan", headers=api.auth(key), json={"plan": "PRO"})
    assert r.status_code == 202
    assert (await api.services.store.project(pid)).next_plan is None
