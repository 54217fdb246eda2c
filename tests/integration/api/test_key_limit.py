"""The cap on a project's active API keys, on SQLite and PostgreSQL: an admin key cannot mint
keys past it (409 `key_limit_reached`), not even with concurrent requests; revoking one makes
room; the operator is not held to it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from entryway.domain.apikeys import KeyEnvironment
from entryway.storage.apikeys import KeyLimitError
from tests.integration.api.conftest import ADMIN_TOKEN, Api

CAP = 4
BODY = {"chains": [80002]}


@pytest.fixture
def capped(api: Api) -> Api:
    api.services.store.api_keys.max_active = CAP
    return api


async def active_keys(api: Api, project_id: str) -> int:
    return sum(k.revoked_at is None for k in await api.services.store.keys(project_id))


async def test_an_admin_key_cannot_mint_keys_past_the_cap(capped: Api) -> None:
    made = []
    for _ in range(CAP - 1):  # the project's first key is one of the four
        r = await capped.client.post("/v1/keys", headers=capped.auth(), json=BODY)
        assert r.status_code == 201, r.text
        made.append(r.json()["keyId"])
    r = await capped.client.post("/v1/keys", headers=capped.auth(), json=BODY)
    assert (r.status_code, r.headers["content-type"]) == (409, "application/problem+json")
    assert r.json()["code"] == "key_limit_reached"
    assert f"{CAP} active API keys" in r.json()["detail"]
    assert "apiKey" not in r.json()
    assert await active_keys(capped, capped.project_id) == CAP

    # A revoked key makes room for one more; another project has its own count.
    assert (await capped.client.delete(f"/v1/keys/{made[0]}", headers=capped.auth())).is_success
    r = await capped.client.post("/v1/keys", headers=capped.auth(), json=BODY)
    assert r.status_code == 201, r.text
    _, other = await capped.new_project()
    r = await capped.client.post("/v1/keys", headers=capped.auth(other), json=BODY)
    assert r.status_code == 201, r.text


async def test_concurrent_requests_cannot_pass_the_cap_together(capped: Api) -> None:
    answers = await asyncio.gather(
        *(capped.client.post("/v1/keys", headers=capped.auth(), json=BODY) for _ in range(10))
    )
    statuses = sorted(r.status_code for r in answers)
    assert statuses == [201] * (CAP - 1) + [409] * (10 - CAP + 1), [r.text for r in answers]
    assert await active_keys(capped, capped.project_id) == CAP


async def test_a_rotation_at_the_cap_and_the_operator_are_not_refused(capped: Api) -> None:
    store = capped.services.store
    now = datetime.now(UTC)
    for _ in range(CAP - 1):
        await store.issue_key(capped.project_id, KeyEnvironment.TEST, [80002], now)
    with pytest.raises(KeyLimitError):
        await store.issue_key(capped.project_id, KeyEnvironment.TEST, [80002], now)
    # Rotating a key issues its successor before revoking it: that one is not counted.
    old = next(k for k in await store.keys(capped.project_id) if k.role.value == "service")
    await store.issue_key(
        capped.project_id, KeyEnvironment.TEST, [80002], now, replacing=old.key_id
    )
    await store.revoke_key(old.key_id, now, project_id=capped.project_id)
    assert await active_keys(capped, capped.project_id) == CAP

    r = await capped.client.post(
        f"/v1/admin/projects/{capped.project_id}/keys",
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        json={"chains": [80002], "role": "admin"},
    )
    assert r.status_code == 201, r.text
    assert await active_keys(capped, capped.project_id) == CAP + 1
