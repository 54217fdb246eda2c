"""The task-status and webhook routers over HTTP (httpx over ASGI) on SQLite and PostgreSQL:
what a project's key may see and do, the secret shown only on creation and rotation, the
delivery log, replays, test events, and problem details with stable codes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request, Response
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.apikeys import KeyEnvironment, KeyRole
from entryway.domain.destinations import PRIVATE_ALLOWED
from entryway.domain.plans import PlanName
from entryway.domain.tasks import RetrySchedule
from entryway.domain.webhooks import SUBSCRIBABLE_EVENTS, verify_webhook
from entryway.service.problems import Problem
from entryway.service.routes_tasks import task_routes
from entryway.service.routes_webhooks import webhook_routes
from entryway.service.services import Services
from entryway.storage.store import Store
from entryway.worker.delivery import DeliverySettings
from entryway.worker.main import WorkerSettings, worker_for
from entryway.worker.worker import Worker
from tests.integration.webhooks.support import SECRETS, Receiver


@dataclass
class Client:
    http: httpx.AsyncClient
    worker: Worker
    store: Store
    key: str
    other_key: str

    def auth(self, key: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key or self.key}"}

    async def call(self, method: str, path: str, *, key: str | None = None, **kw: Any) -> Any:
        response = await self.http.request(method, path, headers=self.auth(key), **kw)
        return response


def app_for(services: Services) -> FastAPI:
    app = FastAPI()
    app.state.services = services

    @app.exception_handler(Problem)
    async def problem(request: Request, exc: Problem) -> Response:
        return exc.response(request.url.path)

    app.include_router(task_routes())
    app.include_router(webhook_routes())
    return app


async def new_key(store: Store) -> str:
    now = datetime.now(UTC)
    owner = await store.create_user(f"{now.timestamp()}-{id(now)}@example.org", now)
    pid = await store.create_project(owner, "routes", PlanName.STARTER, [80002], now)
    key = await store.issue_key(pid, KeyEnvironment.TEST, [80002], now, role=KeyRole.ADMIN)
    return key.secret


@pytest.fixture
async def client(engine: AsyncEngine) -> AsyncIterator[Client]:
    store = Store(engine, auth_cache_seconds=0)
    # The receiver listens on loopback: an operator's service that allows private destinations.
    services = Services(webhook_destinations=PRIVATE_ALLOWED, webhook_secrets=SECRETS)
    services.attach(store)
    transport = httpx.ASGITransport(app=app_for(services))
    delivery = DeliverySettings(schedule=RetrySchedule((0,)), destinations=PRIVATE_ALLOWED)
    async with (
        httpx.AsyncClient(transport=transport, base_url="http://entryway.test") as http,
        worker_for(engine, settings=WorkerSettings(delivery=delivery), secrets=SECRETS) as worker,
    ):
        yield Client(http, worker, store, await new_key(store), await new_key(store))


def assert_problem(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == code


async def test_endpoints_are_managed_by_their_project_only(client: Client) -> None:
    created = await client.call(
        "POST", "/v1/webhooks/endpoints",
        json={"url": "https://example.org/hook", "eventTypes": ["credits.low", "userop.included"],
              "description": "billing"},
    )  # fmt: skip
    assert created.status_code == 201, created.text
    endpoint = created.json()
    assert endpoint["secret"].startswith("whsec_") and endpoint["enabled"] is True
    assert endpoint["eventTypes"] == ["credits.low", "userop.included"]
    path = f"/v1/webhooks/endpoints/{endpoint['id']}"

    listed = (await client.call("GET", "/v1/webhooks/endpoints")).json()["endpoints"]
    assert [e["id"] for e in listed] == [endpoint["id"]] and "secret" not in listed[0]
    assert "secret" not in (await client.call("GET", path)).json()

    patched = await client.call(
        "PATCH", path, json={"enabled": False, "eventTypes": ["credits.low"]}
    )
    assert patched.json()["enabled"] is False and patched.json()["disabledReason"] == "manual"
    assert patched.json()["eventTypes"] == ["credits.low"]
    assert_problem(await client.call("POST", f"{path}/test"), 409, "webhook_endpoint_disabled")

    rotated = (
        await client.call("POST", f"{path}/rotate-secret", json={"overlapSeconds": 60})
    ).json()
    assert rotated["secret"].startswith("whsec_") and rotated["secret"] != endpoint["secret"]
    assert rotated["previousSecretExpiresAt"] is not None

    for method, suffix in (("GET", ""), ("PATCH", ""), ("DELETE", ""), ("POST", "/rotate-secret"),
                           ("POST", "/test"), ("GET", "/deliveries")):  # fmt: skip
        kw: dict[str, Any] = {"json": {}} if method == "PATCH" else {}
        response = await client.call(method, path + suffix, key=client.other_key, **kw)
        assert_problem(response, 404, "webhook_endpoint_not_found")
    assert (await client.call("GET", "/v1/webhooks/endpoints", key=client.other_key)).json() == {
        "endpoints": []
    }

    assert (await client.call("DELETE", path)).status_code == 204
    assert_problem(await client.call("GET", path), 404, "webhook_endpoint_not_found")
    assert (await client.call("GET", "/v1/webhooks/endpoints")).json() == {"endpoints": []}


async def test_bad_endpoints_are_validation_problems(client: Client) -> None:
    for body in (
        {"url": "ftp://example.org", "eventTypes": ["credits.low"]},
        {"url": "https://example.org", "eventTypes": ["credits.lowish"]},
        {"url": "https://example.org", "eventTypes": []},
    ):
        response = await client.call("POST", "/v1/webhooks/endpoints", json=body)
        assert_problem(response, 422, "validation_error")
    response = await client.http.get("/v1/webhooks/endpoints")
    assert_problem(response, 401, "invalid_api_key")


async def test_answers_revealing_a_secret_are_never_cached(client: Client) -> None:
    created = await client.call(
        "POST", "/v1/webhooks/endpoints",
        json={"url": "https://example.org/hook", "eventTypes": ["credits.low"]},
    )  # fmt: skip
    path = f"/v1/webhooks/endpoints/{created.json()['id']}"
    rotated = await client.call("POST", f"{path}/rotate-secret")
    for answer in (created, rotated):
        assert "secret" in answer.json()
        assert answer.headers["cache-control"] == "no-store"
        assert answer.headers["pragma"] == "no-cache"
    listed = await client.call("GET", "/v1/webhooks/endpoints")
    assert "cache-control" not in listed.headers  # no secret in it: the usual caching rules


async def test_descriptions_and_overlaps_are_held_to_their_bounds(client: Client) -> None:
    hook = {"url": "https://example.org/hook", "eventTypes": ["credits.low"]}
    for description in ("\x1b[2J cleared", "left \u202eright", "bell\x07", "x" * 201):
        answer = await client.call(
            "POST", "/v1/webhooks/endpoints", json={**hook, "description": description}
        )
        assert answer.status_code == 422, description
    assert (await client.call("GET", "/v1/webhooks/endpoints")).json() == {"endpoints": []}

    lines = "billing\n\tpager duty"
    created = await client.call(
        "POST", "/v1/webhooks/endpoints", json={**hook, "description": lines}
    )
    assert created.status_code == 201, created.text
    path = f"/v1/webhooks/endpoints/{created.json()['id']}"
    refused = await client.call("PATCH", path, json={"description": "a\x00b"})
    assert refused.status_code == 422
    assert (await client.call("PATCH", path, json={"enabled": "yes"})).status_code == 422
    assert (await client.call("GET", path)).json()["description"] == lines

    for overlap in (True, "60", 60.0, -1, 7 * 24 * 3600 + 1, 2**70):
        answer = await client.call(
            "POST", f"{path}/rotate-secret", json={"overlapSeconds": overlap}
        )
        assert answer.status_code == 422, overlap
    assert (await client.call("GET", path)).json()["previousSecretExpiresAt"] is None
    week = await client.call(
        "POST", f"{path}/rotate-secret", json={"overlapSeconds": 7 * 24 * 3600}
    )
    assert week.status_code == 200, week.text
    until = datetime.fromisoformat(week.json()["previousSecretExpiresAt"])
    assert 6.9 < (until - datetime.now(UTC)).total_seconds() / 86400 <= 7


async def test_a_test_event_is_delivered_logged_replayed_and_its_task_visible(
    client: Client,
) -> None:
    async with Receiver() as receiver:
        endpoint = (
            await client.call(
                "POST", "/v1/webhooks/endpoints",
                json={"url": receiver.url, "eventTypes": ["userop.included"]},
            )
        ).json()  # fmt: skip
        queued = await client.call("POST", f"/v1/webhooks/endpoints/{endpoint['id']}/test")
        assert queued.status_code == 202, queued.text
        task_id = queued.json()["taskId"]

        status = (await client.call("GET", "/task-status", params={"id": task_id})).json()
        assert (status["state"], status["attempts"], status["kind"]) == (
            "queued",
            0,
            "webhook.deliver",
        )
        assert await client.worker.drain() == 1
        status = (await client.call("GET", "/task-status", params={"id": task_id})).json()
        assert status == (await client.call("GET", f"/v1/tasks/{task_id}")).json()
        assert (status["state"], status["attempts"], status["error"]) == ("succeeded", 1, None)
        assert status["result"]["statusCode"] == 204
        for path in (f"/v1/tasks/{task_id}", f"/task-status?id={task_id}", "/v1/tasks/nope"):
            assert_problem(
                await client.call("GET", path, key=client.other_key), 404, "task_not_found"
            )

        [request] = receiver.received
        body = verify_webhook(
            request.body, request.headers, endpoint["secret"],
            now=int(datetime.now(UTC).timestamp()),
        )  # fmt: skip
        assert body["type"] == "webhook.test" and body["data"]["endpointId"] == endpoint["id"]

        log = (
            await client.call("GET", f"/v1/webhooks/endpoints/{endpoint['id']}/deliveries")
        ).json()
        [delivery] = log["deliveries"]
        assert (delivery["state"], delivery["eventType"], delivery["eventId"]) == (
            "delivered", "webhook.test", request.headers["webhook-id"],
        )  # fmt: skip
        [attempt] = delivery["attempts"]
        assert (attempt["outcome"], attempt["statusCode"], attempt["error"]) == (
            "succeeded",
            204,
            None,
        )
        assert attempt["durationMs"] >= 0 and attempt["startedAt"]

        replay_path = f"/v1/webhooks/deliveries/{delivery['id']}/replay"
        assert_problem(
            await client.call("POST", replay_path, key=client.other_key), 404,
            "webhook_delivery_not_found",
        )  # fmt: skip
        replayed = await client.call("POST", replay_path)
        assert replayed.status_code == 202 and replayed.json()["taskId"] != task_id
        assert_problem(await client.call("POST", replay_path), 409, "webhook_delivery_in_progress")
        await client.worker.drain()
        assert len(receiver.received) == 2
        log = (
            await client.call("GET", f"/v1/webhooks/endpoints/{endpoint['id']}/deliveries")
        ).json()
        assert [a["number"] for a in log["deliveries"][0]["attempts"]] == [1, 2]


async def test_the_openapi_document_names_every_operation(client: Client) -> None:
    document = (await client.http.get("/openapi.json")).json()
    operations = {op["operationId"] for item in document["paths"].values() for op in item.values()}
    assert operations == {
        "getTaskStatus", "getTask", "listWebhookEventTypes", "createWebhookEndpoint",
        "listWebhookEndpoints", "getWebhookEndpoint", "updateWebhookEndpoint",
        "deleteWebhookEndpoint", "rotateWebhookSecret", "listWebhookDeliveries",
        "replayWebhookDelivery", "sendWebhookTestEvent",
    }  # fmt: skip
    schemas = document["components"]["schemas"]
    assert "secret" in schemas["EndpointWithSecret"]["properties"]
    assert "secret" not in schemas["EndpointOut"]["properties"]
    events = (await client.call("GET", "/v1/webhooks/event-types")).json()["eventTypes"]
    assert set(events) == {e.value for e in SUBSCRIBABLE_EVENTS} and len(events) == len(set(events))
    assert {"paymaster.deposit_low", "userop.dropped", "account.deployed"} <= set(events)
    assert "webhook.test" not in events
