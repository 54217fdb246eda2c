"""Sponsorship policies and their counters in a real database (SQLite and PostgreSQL), and the
REST routes that manage them."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request, Response
from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.apikeys import KeyRole
from entryway.domain.sponsorship import Cap, Period, SponsorshipRules
from entryway.paymaster.ports import UsageTotals
from entryway.service.auth import current_caller
from entryway.service.problems import Problem
from entryway.service.routes_policies import policy_routes
from entryway.storage.policies import PolicyStore, SqlSponsorshipUsage
from entryway.storage.schema import projects, usage_events, users

NOW = datetime(2026, 11, 21, 12, tzinfo=UTC)
ALICE = "0x1111111111111111111111111111111111111111"
BOB = "0x2222222222222222222222222222222222222222"


async def new_project(engine: AsyncEngine) -> str:
    user_id, project_id = str(uuid.uuid4()), str(uuid.uuid4())
    async with engine.begin() as db:
        await db.execute(
            insert(users).values(user_id=user_id, email=f"{user_id}@example.org", created_at=NOW)
        )
        await db.execute(
            insert(projects).values(
                project_id=project_id, owner_id=user_id, name="demo", plan="STARTER",
                aa_module_enabled=True, chains="80002", created_at=NOW,
            )
        )  # fmt: skip
    return project_id


async def test_policies_are_kept_per_project(engine: AsyncEngine) -> None:
    store = PolicyStore(engine)
    mine, theirs = await new_project(engine), await new_project(engine)
    rules = SponsorshipRules.from_json(
        {"spendCap": {"credits": 5_000}, "perSender": {"operations": 3, "period": "day"},
         "allowedTargets": [BOB.lower()], "endsAt": "2027-01-01T00:00:00Z"}
    )  # fmt: skip
    first = await store.create(mine, "launch", rules, active=True, at=NOW)
    second = await store.create(
        mine, "later", SponsorshipRules(), active=False, at=NOW + timedelta(seconds=1)
    )
    await store.create(theirs, "other", SponsorshipRules(), active=True, at=NOW)

    assert await store.get(mine, first.policy_id) == first
    assert [p.name for p in await store.project_policies(mine)] == ["launch", "later"]
    assert await store.get(theirs, first.policy_id) is None
    assert await store.update(theirs, first.policy_id, at=NOW, active=False) is None
    assert not await store.delete(theirs, first.policy_id)

    later = NOW + timedelta(hours=1)
    changed = await store.update(
        mine, second.policy_id, at=later, active=True, rules=SponsorshipRules(spend_cap=Cap(9))
    )
    assert changed is not None and changed.active and changed.updated_at == later
    assert changed.rules.spend_cap == Cap(9, Period.NEVER) and changed.name == "later"
    assert await store.delete(mine, first.policy_id)
    assert [p.policy_id for p in await store.project_policies(mine)] == [second.policy_id]


async def event(
    engine: AsyncEngine,
    project_id: str,
    policy_id: str | None,
    credits: int,
    *,
    at: datetime = NOW,
    subject: str = ALICE,
    status: str = "held",
    operation: str = "sponsored_user_operation",
    key: str | None = None,
) -> None:
    async with engine.begin() as db:
        await db.execute(
            insert(usage_events).values(
                event_id=str(uuid.uuid4()), project_id=project_id,
                idempotency_key=key or str(uuid.uuid4()), operation=operation, credits=credits,
                overage=0, created_at=at, subject=subject, policy_id=policy_id, status=status,
                chain_id=80002,
            )
        )  # fmt: skip


async def test_counters_sum_what_the_policy_paid_for(engine: AsyncEngine) -> None:
    pid = await new_project(engine)
    usage = SqlSponsorshipUsage(engine)
    await event(engine, pid, "pol", 100)  # held
    await event(engine, pid, "pol", 40, status="settled", subject=BOB)
    await event(engine, pid, "pol", 1_000, status="released")  # never landed: not counted
    await event(engine, pid, "pol", 7, at=NOW - timedelta(days=2), key="sponsor:old")
    await event(engine, pid, "other", 500)  # another policy
    await event(engine, pid, None, 500)  # sponsored without a policy
    await event(engine, pid, "pol", 900, operation="notarization")

    today = NOW.replace(hour=0)
    assert await usage.totals(pid, "pol", since=None) == UsageTotals(147, 3)
    assert await usage.totals(pid, "pol", since=today) == UsageTotals(140, 2)
    assert await usage.totals(pid, "pol", since=today, subject=BOB) == UsageTotals(40, 1)
    assert await usage.totals(pid, "pol", since=None, subject=ALICE) == UsageTotals(107, 2)
    assert await usage.totals(pid, "pol", since=None, excluding="sponsor:old") == UsageTotals(
        140, 2
    )
    assert await usage.totals(await new_project(engine), "pol", since=None) == UsageTotals(0, 0)


# ---------------------------------------------------------------------- the REST routes


@pytest.fixture
async def api(engine: AsyncEngine) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    project_id = await new_project(engine)
    app = FastAPI()
    app.state.services = SimpleNamespace(store=SimpleNamespace(engine=engine))
    app.include_router(policy_routes())

    async def problem(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, Problem)
        return exc.response(request.url.path)

    app.add_exception_handler(Problem, problem)
    caller = SimpleNamespace(project_id=project_id, key_id="k1", role=KeyRole.ADMIN)
    app.dependency_overrides[current_caller] = lambda: caller
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
        yield http, project_id


async def test_policies_through_the_api(api: tuple[httpx.AsyncClient, str]) -> None:
    http, _ = api
    rules = {
        "operationCap": {"operations": 100, "period": "day"},
        "allowedSelectors": ["0xA9059CBB"],
    }
    created = await http.post("/v1/policies", json={"name": "launch", "rules": rules})
    assert created.status_code == 201, created.text
    body = created.json()
    policy_id = body["policyId"]
    assert body["active"] is True and body["updatedAt"] is None
    assert body["rules"] == {
        "operationCap": {"operations": 100, "period": "day"},
        "allowedSelectors": ["0xa9059cbb"],
    }
    assert (await http.get(f"/v1/policies/{policy_id}")).json() == body
    listed = (await http.get("/v1/policies")).json()
    assert [p["policyId"] for p in listed["policies"]] == [policy_id]

    patched = await http.patch(f"/v1/policies/{policy_id}", json={"active": False, "rules": {}})
    assert patched.status_code == 200
    assert (patched.json()["active"], patched.json()["rules"]) == (False, {})
    assert patched.json()["updatedAt"] is not None

    assert (await http.delete(f"/v1/policies/{policy_id}")).status_code == 204
    missing = await http.get(f"/v1/policies/{policy_id}")
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/problem+json"
    assert missing.json()["code"] == "policy_not_found"
    assert (await http.delete(f"/v1/policies/{policy_id}")).status_code == 404


@pytest.mark.parametrize(
    ("payload", "detail"),
    [
        ({"name": "x", "rules": {"spendCap": {"credits": -5}}}, "non-negative integer"),
        ({"name": "x", "rules": {"allowedTargets": "0xabc"}}, "20-byte hex addresses"),
        ({"name": "x", "rules": {"maxSpend": 5}}, "unknown rule(s): maxSpend"),
    ],
)
async def test_bad_rules_are_a_422_problem_saying_why(
    api: tuple[httpx.AsyncClient, str], payload: dict[str, Any], detail: str
) -> None:
    http, _ = api
    response = await http.post("/v1/policies", json=payload)
    assert response.status_code == 422
    assert response.json()["code"] == "invalid_policy_rules"
    assert detail in response.json()["detail"]
    assert (await http.get("/v1/policies")).json() == {"policies": []}


async def test_another_projects_policy_is_not_found(
    api: tuple[httpx.AsyncClient, str], engine: AsyncEngine
) -> None:
    http, _ = api
    stranger = await PolicyStore(engine).create(
        await new_project(engine), "theirs", SponsorshipRules(), active=True, at=NOW
    )
    for method in ("GET", "DELETE"):
        answer = await http.request(method, f"/v1/policies/{stranger.policy_id}")
        assert answer.status_code == 404
    patch = await http.patch(f"/v1/policies/{stranger.policy_id}", json={"name": "mine now"})
    assert patch.status_code == 404
    assert (await PolicyStore(engine).get(stranger.project_id, stranger.policy_id)) == stranger
