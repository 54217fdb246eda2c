"""A project's spending budget over the REST API, on SQLite and PostgreSQL: an admin key sets
and lifts it, a service key cannot, amounts the database cannot hold are refused; the
credits.budget alert (and its webhook event) fires once a cycle, when the overage reaches
80% of the budget, and never without a budget."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from entryway.composition.events import alert_events
from entryway.domain.bounds import MAX_CREDITS
from entryway.domain.webhooks import SUBSCRIBABLE_EVENTS, EventType
from tests.integration.api.conftest import Api


class Published:
    """The webhook events the alerts emit (the real hook, a recording publisher)."""

    def __init__(self) -> None:
        self.events: list[tuple[EventType, str, dict[str, Any]]] = []

    async def emit(
        self,
        event_type: EventType,
        project_id: str,
        data: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
    ) -> None:
        self.events.append((event_type, project_id, dict(data)))


async def test_an_admin_key_sets_and_lifts_the_budget_and_a_service_key_cannot(api: Api) -> None:
    pid, admin = await api.new_project()
    r = await api.client.get("/v1/project", headers=api.auth(admin))
    assert r.json()["overageBudget"] is None  # off by default
    r = await api.client.patch("/v1/project", headers=api.auth(admin), json={"overageBudget": 0})
    assert r.status_code == 200 and r.json()["overageBudget"] == 0
    assert (await api.services.store.project(pid)).overage_budget == 0
    service = await api.service_key(project_id=pid)
    r = await api.client.patch("/v1/project", headers=api.auth(service), json={"overageBudget": 9})
    assert r.status_code == 403, r.text
    for bad in (-1, MAX_CREDITS + 1, "1000", 1.5):
        r = await api.client.patch(
            "/v1/project", headers=api.auth(admin), json={"overageBudget": bad}
        )
        assert r.status_code == 422, (bad, r.text)
    r = await api.client.patch("/v1/project", headers=api.auth(admin), json={"name": "renamed"})
    assert r.json()["overageBudget"] == 0  # left as it was
    r = await api.client.patch("/v1/project", headers=api.auth(admin), json={"overageBudget": None})
    assert r.status_code == 200 and r.json()["overageBudget"] is None
    credits = (await api.client.get("/v1/credits", headers=api.auth(admin))).json()
    assert credits["overageBudget"] is None


async def test_the_budget_alert_fires_at_80_percent_once_and_becomes_a_webhook_event(
    api: Api,
) -> None:
    pid, admin = await api.new_project()  # FREE: 1,000,000 credits
    published = Published()
    meter = api.services.platform.meter
    meter.on_alert = alert_events(published)  # type: ignore[arg-type]
    ledger = api.services.store.ledger
    now = datetime.now(UTC)
    await ledger.record_usage(pid, "a", "notarization", 1_000_799, now)  # 799 of overage
    assert "credits.budget" not in await meter.check_alerts(pid)  # no budget: never
    r = await api.client.patch(
        "/v1/project", headers=api.auth(admin), json={"overageBudget": 1_000}
    )
    assert r.status_code == 200
    assert await meter.check_alerts(pid) == []  # 79.9%: not yet
    await ledger.record_usage(pid, "b", "notarization", 1, now)  # 800: 80%
    assert await meter.check_alerts(pid) == ["credits.budget"]
    await ledger.record_usage(pid, "c", "notarization", 500, now)
    assert await meter.check_alerts(pid) == []  # once a cycle
    budget_events = [e[1:] for e in published.events if e[0] is EventType.CREDITS_BUDGET]
    assert budget_events == [(pid, {"overage": 800, "budget": 1_000, "percent": 80})]
    assert EventType.CREDITS_BUDGET in SUBSCRIBABLE_EVENTS
    alerts = (await api.client.get("/v1/alerts", headers=api.auth(admin))).json()
    [budget] = [a for a in alerts if a["kind"] == "credits.budget"]
    assert "80% of the spending budget of 1000" in budget["detail"]
