"""Who may hold an owner's power: only owners make admin keys in the dashboard (an admin key
changes the plan over the API), and a plan change made with a key is on the billing page,
by whom, with an approved change it undid shown cancelled. The dashboard and the API on one
app, in-process, on SQLite and PostgreSQL."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
import pytest
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.dashboard.app import install_dashboard
from entryway.dashboard.web import DashboardOptions
from entryway.domain.accounts import ProjectRole
from entryway.domain.apikeys import KeyEnvironment, KeyRole
from entryway.domain.plans import PlanName
from entryway.service.app import create_app
from entryway.service.services import Services
from entryway.storage.accounts import AccountStore
from entryway.storage.schema import projects
from entryway.storage.store import Store
from tests.integration.api.conftest import ADMIN_TOKEN
from tests.integration.storage.conftest import engine  # noqa: F401 - the fixture

_CSRF_FIELD = re.compile(r'name="csrf_token" value="([^"]+)"')
OPERATOR = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@dataclass
class Console:
    client: httpx.AsyncClient
    store: Store
    project_id: str
    owner: str  # session secrets
    member: str

    async def page(self, session: str, path: str) -> httpx.Response:
        return await self.client.get(path, headers={"cookie": f"entryway_session={session}"})

    async def post(self, session: str, path: str, fields: dict[str, str]) -> httpx.Response:
        page = await self.page(session, f"/dashboard/projects/{self.project_id}/keys")
        found = _CSRF_FIELD.search(page.text)
        assert found, page.text
        return await self.client.post(
            path,
            data={"csrf_token": found.group(1), **fields},
            headers={"cookie": f"entryway_session={session}"},
        )

    def keys_path(self) -> str:
        return f"/dashboard/projects/{self.project_id}/keys"


@pytest.fixture
async def console(engine: AsyncEngine) -> AsyncIterator[Console]:  # noqa: F811
    services = Services(admin_token=ADMIN_TOKEN)
    store = Store(engine, auth_cache_seconds=0)
    services.attach(store)
    app = create_app(services)
    install_dashboard(app, DashboardOptions(secure_cookies=False))
    accounts = AccountStore(engine)
    now = datetime.now(UTC)
    stamp = now.timestamp()
    owner = await accounts.sign_up(f"owner-{stamp}@example.com", "unused", now)
    member = await accounts.sign_up(f"member-{stamp}@example.com", "unused", now)
    pid = await store.create_project(owner, "roles", PlanName.FREE, [80002], now)
    await accounts.add_member(pid, member, ProjectRole.MEMBER, now)
    owner_session, _ = await accounts.open_session(owner, operator=False, at=now)
    member_session, _ = await accounts.open_session(member, operator=False, at=now)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://entryway.test") as client:
        yield Console(client, store, pid, owner_session, member_session)


async def test_a_member_makes_service_keys_but_no_admin_key(console: Console) -> None:
    page = await console.page(console.member, console.keys_path())
    assert 'value="service"' in page.text and 'value="admin"' not in page.text
    fields = {"chains": "80002", "role": "admin", "environment": "test"}
    refused = await console.post(console.member, console.keys_path(), fields)
    assert refused.status_code == 403
    assert "Only the project&#39;s owners create admin keys" in refused.text
    keys = await console.store.keys(console.project_id)
    assert not any(k.role is KeyRole.ADMIN for k in keys)
    made = await console.post(console.member, console.keys_path(), {**fields, "role": "service"})
    assert made.status_code == 200 and "Your new service key" in made.text


async def test_a_member_cannot_rotate_an_admin_key_into_a_secret_of_their_own(
    console: Console,
) -> None:
    admin = await console.store.issue_key(
        console.project_id, KeyEnvironment.TEST, [80002], datetime.now(UTC), role=KeyRole.ADMIN
    )
    page = await console.page(console.member, console.keys_path())
    assert f"keys/{admin.key_id}/rotate" not in page.text
    refused = await console.post(console.member, f"{console.keys_path()}/{admin.key_id}/rotate", {})
    assert refused.status_code == 403
    assert "Your new admin key" not in refused.text
    keys = await console.store.keys(console.project_id)
    assert [k.key_id for k in keys if k.revoked_at is None] == [admin.key_id]


async def test_an_owner_makes_and_rotates_admin_keys(console: Console) -> None:
    fields = {"chains": "80002", "role": "admin", "environment": "test"}
    made = await console.post(console.owner, console.keys_path(), fields)
    assert made.status_code == 200 and "Your new admin key" in made.text
    [key] = await console.store.keys(console.project_id)
    rotated = await console.post(console.owner, f"{console.keys_path()}/{key.key_id}/rotate", {})
    assert rotated.status_code == 200 and "Your new admin key" in rotated.text


async def test_a_plan_change_made_with_a_key_shows_on_the_billing_page_and_undoes_the_approval(
    console: Console,
) -> None:
    pid = console.project_id
    billing = f"/dashboard/projects/{pid}/billing"
    asked = await console.post(console.owner, f"{billing}/plan", {"plan": "PRO"})
    assert asked.status_code == 303
    [pending] = [
        a
        for a in (await console.client.get("/v1/admin/approvals", headers=OPERATOR)).json()
        if a["projectId"] == pid
    ]
    approve = f"/v1/admin/approvals/{pending['approvalId']}/approve"
    assert (await console.client.post(approve, headers=OPERATOR)).status_code == 200
    page = (await console.page(console.owner, billing)).text
    assert 'id="scheduled-change"' in page and "PRO" in page

    key = await console.store.issue_key(
        pid, KeyEnvironment.TEST, [80002], datetime.now(UTC), role=KeyRole.ADMIN
    )
    auth = {"Authorization": f"Bearer {key.secret}"}
    changed = await console.client.put("/v1/project/plan", headers=auth, json={"plan": "FREE"})
    assert changed.status_code == 200 and changed.json()["nextPlan"] is None

    page = (await console.page(console.owner, billing)).text
    assert 'id="scheduled-change"' not in page  # nothing is scheduled any more
    rows = re.findall(r'<tr data-status="(\w+)">(.*?)</tr>', page, re.S)
    statuses = [status for status, _ in rows]
    assert statuses == ["direct", "cancelled"], rows  # newest first
    direct, cancelled = rows[0][1], rows[1][1]
    assert f"API key {key.key_id}" in direct and "FREE" in direct
    assert "cancelled the change to PRO" in direct
    assert "PRO" in cancelled and "FREE chosen instead" in cancelled
    assert ">approved<" not in page

    operator, _ = await AccountStore(console.store.engine).open_session(
        None, operator=True, at=datetime.now(UTC)
    )
    queue = (await console.page(operator, "/dashboard/operator/approvals")).text
    assert f'data-approval="{pending["approvalId"]}" data-status="cancelled"' in queue


async def test_a_member_still_cannot_change_the_plan_in_the_dashboard(console: Console) -> None:
    billing = f"/dashboard/projects/{console.project_id}/billing"
    refused = await console.post(console.member, f"{billing}/plan", {"plan": "FREE"})
    assert refused.status_code == 403
    project = await console.store.project(console.project_id)
    assert project.next_plan is None
    page = (await console.page(console.owner, billing)).text
    assert "data-status=" not in page  # nothing was recorded


async def test_an_owner_moves_to_a_cheaper_plan_without_the_operator(console: Console) -> None:
    pid = console.project_id
    async with console.store.engine.begin() as db:  # as if SCALE had been approved long ago
        await db.execute(update(projects).where(projects.c.project_id == pid).values(plan="SCALE"))
    billing = f"/dashboard/projects/{pid}/billing"
    page = (await console.page(console.owner, billing)).text
    assert "lowers the bill: no approval needed" in page  # PRO, STARTER and FREE
    assert "raises the bill: needs the operator" in page  # ENTERPRISE
    moved = await console.post(console.owner, f"{billing}/plan", {"plan": "PRO"})
    assert moved.status_code == 303 and moved.headers["location"].endswith("done=scheduled")
    assert (await console.store.project(pid)).next_plan is PlanName.PRO
    page = (await console.page(console.owner, billing)).text
    rows = re.findall(r'<tr data-status="(\w+)">(.*?)</tr>', page, re.S)
    assert [status for status, _ in rows] == ["direct"] and "PRO" in rows[0][1]
    queue = (await console.client.get("/v1/admin/approvals", headers=OPERATOR)).json()
    assert not [a for a in queue if a["projectId"] == pid]  # nothing for the operator


async def test_an_owner_sets_the_spending_budget_on_the_billing_page_and_a_member_cannot(
    console: Console,
) -> None:
    pid = console.project_id
    billing = f"/dashboard/projects/{pid}/billing"
    page = (await console.page(console.owner, billing)).text
    assert "No spending budget: operations never stop for credits" in page
    assert 'id="budget-form"' in page
    member_page = (await console.page(console.member, billing)).text
    assert 'id="budget-form"' not in member_page
    refused = await console.post(console.member, f"{billing}/budget", {"budget": "5"})
    assert refused.status_code == 403
    assert (await console.store.project(pid)).overage_budget is None

    for bad in ("-5", "lots", "1.5", str(2**63)):
        wrong = await console.post(console.owner, f"{billing}/budget", {"budget": bad})
        assert wrong.status_code == 400 and "whole number of credits" in wrong.text, bad
    saved = await console.post(console.owner, f"{billing}/budget", {"budget": "1,000"})
    assert saved.status_code == 303 and saved.headers["location"].endswith("done=budget")
    assert (await console.store.project(pid)).overage_budget == 1_000
    page = (await console.page(console.owner, billing)).text
    assert 'value="1000"' in page and 'id="budget-alert"' not in page

    # 850 credits past the allowance: the page warns at 80%, and says when it is used up.
    now = datetime.now(UTC)
    await console.store.ledger.record_usage(pid, "big", "notarization", 1_000_850, now)
    page = (await console.page(console.owner, billing)).text
    assert "(85%)" in page and "reached 80% of the spending budget" in page
    await console.store.ledger.record_usage(pid, "more", "notarization", 150, now)
    page = (await console.page(console.owner, billing)).text
    assert "The spending budget is used up" in page

    lifted = await console.post(console.owner, f"{billing}/budget", {"budget": " "})
    assert lifted.status_code == 303
    assert (await console.store.project(pid)).overage_budget is None
