"""The operator endpoints on a real database: /readyz answers 200 while the database answers and
503 (with Retry-After, naming the check) once it is gone, and Redis gone (or refusing its
counts) is degraded, not unready; /metrics exposes the service's metric families, counts
requests by route template, and reads the task queue and the overdue support requests when
scraped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.plans import PlanName, SupportLevel
from entryway.domain.support import SupportTopic
from entryway.service.ratelimit import RateLimiter, parse_limits
from entryway.storage.engine import make_engine
from entryway.storage.store import Store
from entryway.storage.support import SupportRequests
from entryway.storage.tasks import TaskQueue
from tests.integration.api.conftest import ADMIN_TOKEN, Api, make_api
from tests.integration.api.test_rate_limits import clear_of_minute_edge, redis_url
from tests.integration.storage.test_accepted_group_commit import accepted_op
from tests.integration.test_redis_outage import RefusingUser

FAMILIES = {
    "entryway_http_requests",
    "entryway_http_request_duration_seconds",
    "entryway_webhook_delivery_failures",
    # The bundling series (entryway_mempool_ops, ...) come only from a process with a
    # bundler running: this one serves no chain (tests/integration/test_process_observability.py).
    "entryway_node_rpc_failures",
    "entryway_paymaster_deposit_wei",
    "entryway_credits_charged",
    "entryway_accepted_op_groups",
    "entryway_tasks",
    "entryway_task_oldest_age_seconds",
    "entryway_support_overdue",
}
OPERATOR = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


async def test_ready_while_the_database_answers(api: Api) -> None:
    public = await api.client.get("/readyz")
    assert public.status_code == 200, public.text
    assert public.json() == {"status": "ready", "checks": {"database": {"ok": True}}}
    detailed = await api.client.get("/readyz", headers=OPERATOR)
    assert detailed.json()["checks"]["database"]["detail"].endswith("answered")


async def test_not_ready_once_the_database_is_gone(api: Api) -> None:
    # Nothing listens on port 1: every connection attempt is refused.
    gone = make_engine("postgresql://entryway:hunter2@127.0.0.1:1/entryway")
    api.services.attach(Store(gone))
    try:
        answer = await api.client.get("/readyz", headers=OPERATOR)
    finally:
        await gone.dispose()
    assert answer.status_code == 503
    assert int(answer.headers["Retry-After"]) >= 1
    body = answer.json()
    assert (body["status"], body["failing"]) == ("not_ready", ["database"])
    assert body["checks"]["database"]["ok"] is False
    assert "hunter2" not in answer.text and "127.0.0.1:1" not in answer.text


async def test_redis_is_checked_when_rate_limits_are_shared_through_it(
    engine: AsyncEngine,
) -> None:
    async for api in make_api(engine, RateLimiter(redis_url=await redis_url())):
        answer = await api.client.get("/readyz")
        assert answer.status_code == 200, answer.text
        assert answer.json()["checks"]["redis"] == {"ok": True}
        assert "degraded" not in answer.json()


async def test_redis_gone_leaves_the_service_serving_and_ready_but_degraded(
    engine: AsyncEngine,
) -> None:
    """Nothing listens on port 1: readiness names Redis as degraded without failing (and
    the limiter counts in memory from then on), requests are served (never a 500) and
    limited in this process."""
    limits = {**parse_limits(""), PlanName.FREE: "3/minute"}
    limiter = RateLimiter(limits, redis_url="redis://:hunter2@127.0.0.1:1/0")
    assert limiter.shared is not None
    async for api in make_api(engine, limiter):
        await clear_of_minute_edge()
        answer = await api.client.get("/readyz", headers=OPERATOR)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert (body["status"], body["degraded"]) == ("ready", ["redis"])
        assert body["checks"]["redis"]["ok"] is False
        assert "counted in each process" in body["checks"]["redis"]["detail"]
        assert "hunter2" not in answer.text
        assert limiter.shared.down  # found by the check, before any request
        asked = [await api.client.get("/v1/tasks/no-such-task", headers=api.auth()) for _ in "1234"]
        assert [a.status_code for a in asked] == [404, 404, 404, 429], asked[-1].text
        assert asked[0].headers["RateLimit-Remaining"] == "2"


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def test_metrics_count_requests_by_route_template_and_read_the_queue(api: Api) -> None:
    await TaskQueue(api.services.store.engine).enqueue(
        "test.waiting", {}, project_id=None, run_at=datetime.now(UTC) - timedelta(minutes=2)
    )
    before = await api.client.get("/metrics")
    assert before.status_code == 200
    assert before.headers["content-type"].startswith("text/plain")
    names = {f.name for f in text_string_to_metric_families(before.text)}
    assert names >= FAMILIES, FAMILIES - names

    missing = await api.client.get("/v1/tasks/no-such-task", headers=api.auth())
    assert missing.status_code == 404
    after = samples((await api.client.get("/metrics")).text)

    route = frozenset({("method", "GET"), ("route", "/v1/tasks/{task_id}"), ("status", "404")})
    assert samples(before.text).get(("entryway_http_requests_total", route), 0.0) == 0.0
    assert after[("entryway_http_requests_total", route)] == 1.0
    assert not any("no-such-task" in dict(labels).get("route", "") for _, labels in after)
    queued = frozenset({("kind", "test.waiting"), ("state", "queued")})
    assert after[("entryway_tasks", queued)] == 1.0
    age = after[("entryway_task_oldest_age_seconds", frozenset({("kind", "test.waiting")}))]
    assert 100 < age < 600


async def test_metrics_count_open_support_requests_past_their_target_by_level(
    api: Api,
) -> None:
    store = api.services.store
    now = datetime.now(UTC)
    author = await store.create_user(f"author-{now.timestamp()}@example.org", now)
    requests = SupportRequests(store.engine)
    hours_ago = {SupportLevel.SLA: 5, SupportLevel.PRIORITY: 23, SupportLevel.COMMUNITY: 73}
    for level, hours in hours_ago.items():  # SLA past 4 h, priority within 24 h, community past
        filed = now - timedelta(hours=hours)
        await requests.file(author, None, SupportTopic.OTHER, "Help", None, filed, level)
    answered = await requests.file(
        author, None, SupportTopic.OTHER, "Help", None, now - timedelta(days=9), SupportLevel.SLA
    )
    await requests.answer(answered, "Done", now, by="ops@example.org")

    scraped = samples((await api.client.get("/metrics")).text)
    overdue = {
        dict(labels)["level"]: value
        for (name, labels), value in scraped.items()
        if name == "entryway_support_overdue"
    }
    assert overdue == {"sla_and_dedicated_account_manager": 1, "priority": 0, "community": 1}


async def test_credits_charged_are_counted_by_operation_not_by_project(api: Api) -> None:
    who = await api.services.store.authenticate(api.key)
    quote = api.services.prices.notarization_quote(data_bytes=32, verification_steps=1)
    assert quote.credits > 0
    meter = api.services.platform.meter
    await meter.charge(who, quote, "metrics-1", endpoint="notarizations")
    await meter.charge(who, quote, "metrics-1", endpoint="notarizations")  # the same charge

    after = samples((await api.client.get("/metrics")).text)
    charged = {
        dict(labels)["operation"]: value
        for (name, labels), value in after.items()
        if name == "entryway_credits_charged_total"
    }
    assert charged == {"notarization": float(quote.credits)}
    assert not any(api.project_id in str(labels) for _, labels in after)


async def test_accepted_op_groups_are_counted_by_how_they_were_written(api: Api) -> None:
    """PostgreSQL writes a group in one statement without the lock, and a group carrying an op
    charged before again under it; SQLite writes every group under the lock."""
    ledger = api.services.store.ledger
    first, second = accepted_op(api.project_id, 1), accepted_op(api.project_id, 2)
    await ledger.record_accepted_ops([first])
    await ledger.record_accepted_ops([first, second])  # `first` sent again

    after = samples((await api.client.get("/metrics")).text)
    groups = {
        dict(labels)["write"]: value
        for (name, labels), value in after.items()
        if name == "entryway_accepted_op_groups_total"
    }
    if ledger.engine.dialect.name == "postgresql":
        expected = {"at_once": 1.0, "charged_before": 1.0, "lot_drawn": 0.0, "under_lock": 0.0}
    else:
        expected = {"at_once": 0.0, "charged_before": 0.0, "lot_drawn": 0.0, "under_lock": 2.0}
    assert groups == expected


async def test_metrics_off_this_host_take_a_token(api: Api) -> None:
    proxied = {"X-Forwarded-For": "203.0.113.9"}
    refused = await api.client.get("/metrics", headers=proxied)
    assert refused.status_code == 401
    assert refused.json()["code"] == "metrics_token_required"
    allowed = await api.client.get("/metrics", headers={**proxied, **OPERATOR})
    assert allowed.status_code == 200


async def test_redis_refusing_counts_leaves_the_service_serving_and_ready_but_degraded(
    engine: AsyncEngine,
) -> None:
    """Redis answering, and refusing what a count runs (as when it is out of memory or a
    read-only replica): requests are served and limited in this process, never a 500, and
    readiness says Redis is degraded and why."""
    limits = {**parse_limits(""), PlanName.FREE: "3/minute"}
    user = RefusingUser(await redis_url())
    await user.allow_counts(False)
    limiter = RateLimiter(limits, redis_url=user.url)
    assert limiter.shared is not None
    limiter.shared.probe_every_s = 3600
    try:
        async for api in make_api(engine, limiter):
            await clear_of_minute_edge()
            asked = [
                await api.client.get("/v1/tasks/no-such-task", headers=api.auth()) for _ in "1234"
            ]
            assert [a.status_code for a in asked] == [404, 404, 404, 429], asked[-1].text
            assert limiter.shared.down
            answer = await api.client.get("/readyz", headers=OPERATOR)
            assert answer.status_code == 200, answer.text
            body = answer.json()
            assert (body["status"], body["degraded"]) == ("ready", ["redis"])
            assert "a write refused" in body["checks"]["redis"]["detail"]
            assert user.password not in answer.text
    finally:
        await user.aclose()
