"""Webhook destinations on SQLite and PostgreSQL: a URL the service may not reach is refused
when registered (REST, problem details with a stable code) and, when its name resolves to a
private address, at delivery, where nothing connects and the log reads the same whether a
port is open or closed. The operator's opt-in lets a loopback receiver have its events."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.destinations import PRIVATE_ALLOWED, PUBLIC_ONLY, DestinationPolicy
from entryway.domain.tasks import RetrySchedule, TaskState
from entryway.domain.webhooks import (
    AttemptOutcome,
    DeliveryState,
    EndpointNotAllowedError,
    EventType,
    verify_webhook,
)
from entryway.storage.tasks import TaskQueue
from entryway.storage.webhook_log import DeliveryLog
from entryway.storage.webhooks import WebhookStore
from entryway.worker.delivery import REFUSED as REFUSAL
from entryway.worker.delivery import DeliverySettings
from entryway.worker.destinations import Resolver, system_resolver
from entryway.worker.main import WorkerSettings, worker_for
from tests.integration.api.conftest import Api, api  # noqa: F401 - the fixture
from tests.integration.webhooks.support import SECRETS, Receiver, new_project

HOOKS_NAME = "hooks.example.test"  # resolved by the tests' own DNS, to loopback
ADMIN_PORT = 8000

REFUSED = [
    f"http://127.0.0.1:{ADMIN_PORT}/v1/admin/projects",
    "http://localhost/hooks",
    "http://[::1]:5432/",
    "http://169.254.169.254/latest/meta-data/",
    f"http://0x7f000001:{ADMIN_PORT}/",
    "http://2130706433/",
    "http://0177.0.0.1/",
    "http://127.1/",
    "http://user:pass@127.0.0.1/hooks",
    "http://10.0.0.5/hooks",
    "http://[::ffff:192.168.1.1]/hooks",
    "http://[fe80::1]/hooks",
    "http://192.0.0.192/k",  # global by Python 3.11.7's ipaddress, not by IANA
    "http://192.0.0.8/",
    "http://192.88.99.1/",
]


def assert_not_allowed(response: httpx.Response) -> None:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == "webhook_url_not_allowed"


async def test_urls_the_service_may_not_reach_are_refused_at_registration(api: Api) -> None:  # noqa: F811
    api.services.webhook_secrets = SECRETS
    endpoints = "/v1/webhooks/endpoints"
    for url in REFUSED:
        body = {"url": url, "eventTypes": ["credits.low"]}
        assert_not_allowed(await api.client.post(endpoints, json=body, headers=api.auth()))
    for url in ("http://xn--localhost-:9999/f", "http://-x.example.org/"):
        invalid = await api.client.post(
            endpoints, json={"url": url, "eventTypes": ["credits.low"]}, headers=api.auth()
        )
        assert invalid.status_code == 422, invalid.text
        assert invalid.json()["code"] == "validation_error"
        assert "not a valid host name" in invalid.json()["detail"]
    assert (await api.client.get(endpoints, headers=api.auth())).json() == {"endpoints": []}

    created = await api.client.post(
        endpoints,
        json={"url": "https://hooks.example.org/in", "eventTypes": ["credits.low"]},
        headers=api.auth(),
    )
    assert created.status_code == 201, created.text
    path = f"{endpoints}/{created.json()['id']}"
    moved = await api.client.patch(path, json={"url": REFUSED[0]}, headers=api.auth())
    assert_not_allowed(moved)
    unchanged = (await api.client.get(path, headers=api.auth())).json()
    assert unchanged["url"] == "https://hooks.example.org/in"


def answering(table: dict[str, Sequence[str]]) -> Resolver:
    """The system's DNS, but for the names in `table` (as /etc/hosts would answer them)."""

    async def resolve(host: str, port: int) -> Sequence[str]:
        if host in table:
            return table[host]
        return await system_resolver(host, port)

    return resolve


@dataclass
class Rig:
    engine: AsyncEngine
    project_id: str

    def store(self, policy: DestinationPolicy) -> WebhookStore:
        return WebhookStore(self.engine, destinations=policy, secrets=SECRETS)

    async def deliver(self, policy: DestinationPolicy, resolver: Resolver) -> int:
        """Emit one event and run the delivery once with a worker under `policy`."""
        settings = WorkerSettings(
            delivery=DeliverySettings(schedule=RetrySchedule((60,)), destinations=policy)
        )
        await self.store(PUBLIC_ONLY).emit(EventType.CREDITS_LOW, self.project_id, {"n": 1})
        async with worker_for(
            self.engine, settings=settings, secrets=SECRETS, resolver=resolver
        ) as worker:
            return await worker.drain()


@pytest.fixture
async def rig(engine: AsyncEngine) -> AsyncIterator[Rig]:
    yield Rig(engine, await new_project(engine))


async def test_a_name_resolving_to_loopback_is_refused_at_delivery_and_nothing_connects(
    rig: Rig,
) -> None:
    open_port, closed_port = Receiver(), Receiver()  # only the first will listen
    dns = answering({HOOKS_NAME: ["127.0.0.1"]})
    urls = [f"http://{HOOKS_NAME}:{r.port}/hooks" for r in (open_port, closed_port)]
    # A name passes registration: only its addresses at delivery can tell.
    created = [await rig.store(PUBLIC_ONLY).create_endpoint(rig.project_id, u, ["credits.low"])
               for u in urls]  # fmt: skip
    async with open_port:
        assert await rig.deliver(PUBLIC_ONLY, dns) == 2
    assert open_port.connections == 0 and open_port.received == []

    log = DeliveryLog(rig.engine)
    attempts = []
    for c in created:
        [delivery] = await log.history(rig.project_id, c.endpoint.endpoint_id)
        assert delivery.state is DeliveryState.PENDING  # retried later, as any failure
        [attempt] = delivery.log
        attempts.append((attempt.outcome, attempt.status_code, attempt.error))
    # The open port and the closed one read the same: nothing to map internal services with.
    assert attempts == [(AttemptOutcome.REFUSED, None, REFUSAL)] * 2


async def test_localhost_registered_while_allowed_is_refused_once_the_opt_in_is_gone(
    rig: Rig,
) -> None:
    async with Receiver() as receiver:
        url = f"http://localhost:{receiver.port}/hooks"
        with pytest.raises(EndpointNotAllowedError):
            await rig.store(PUBLIC_ONLY).create_endpoint(rig.project_id, url, ["credits.low"])
        created = await rig.store(PRIVATE_ALLOWED).create_endpoint(
            rig.project_id, url, ["credits.low"]
        )
        assert await rig.deliver(PUBLIC_ONLY, system_resolver) == 1  # the system's DNS
        assert receiver.connections == 0
        [delivery] = await DeliveryLog(rig.engine).history(
            rig.project_id, created.endpoint.endpoint_id
        )
        assert [(a.outcome, a.error) for a in delivery.log] == [(AttemptOutcome.REFUSED, REFUSAL)]


async def test_with_the_opt_in_a_loopback_receiver_gets_its_event_under_its_name(
    rig: Rig,
) -> None:
    async with Receiver() as receiver:
        url = f"http://{HOOKS_NAME}:{receiver.port}/hooks"
        created = await rig.store(PRIVATE_ALLOWED).create_endpoint(
            rig.project_id, url, ["credits.low"]
        )
        assert await rig.deliver(PRIVATE_ALLOWED, answering({HOOKS_NAME: ["127.0.0.1"]})) == 1
        [request] = receiver.received
        assert request.headers["host"] == f"{HOOKS_NAME}:{receiver.port}"
        at = int(request.headers["webhook-timestamp"])
        assert verify_webhook(request.body, request.headers, created.secret, now=at)["data"]
        [delivery] = await DeliveryLog(rig.engine).history(
            rig.project_id, created.endpoint.endpoint_id
        )
        assert delivery.state is DeliveryState.DELIVERED


async def test_the_queue_keeps_a_refused_delivery_for_its_retries(rig: Rig) -> None:
    """A refused attempt is a failed one: the endpoint is not disabled at once, so a fixed
    DNS record (or the operator's opt-in) lets the next attempt through."""
    url = f"http://{HOOKS_NAME}:9/hooks"
    created = await rig.store(PUBLIC_ONLY).create_endpoint(rig.project_id, url, ["credits.low"])
    await rig.deliver(PUBLIC_ONLY, answering({HOOKS_NAME: ["10.1.2.3"]}))
    endpoint = await rig.store(PUBLIC_ONLY).find_endpoint(created.endpoint.endpoint_id)
    assert endpoint is not None and endpoint.enabled and endpoint.failure_streak == 1
    [delivery] = await DeliveryLog(rig.engine).history(rig.project_id, endpoint.endpoint_id)
    assert delivery.task_id is not None
    task = await TaskQueue(rig.engine).find(delivery.task_id)
    assert task is not None and (task.state, task.attempts) == (TaskState.QUEUED, 1)
    assert task.error == REFUSAL


async def test_an_internal_name_and_an_unknown_one_read_the_same_in_the_tenants_log(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    """Were an unknown name logged differently from one resolving to loopback, a tenant could
    list the operator's internal names; the operator's own log keeps the difference."""
    internal, unknown = "db.example.test", "no-such-host.invalid"  # RFC 6761: never resolves
    dns = answering({internal: ["127.0.0.1"], "anycast.example.test": ["192.0.0.192"]})
    urls = [f"http://{h}:5432/" for h in (internal, unknown, "anycast.example.test")]
    store = rig.store(PUBLIC_ONLY)
    created = [await store.create_endpoint(rig.project_id, u, ["credits.low"]) for u in urls]
    with caplog.at_level("INFO", logger="entryway.webhooks"):
        assert await rig.deliver(PUBLIC_ONLY, dns) == 3

    log = DeliveryLog(rig.engine)
    seen = []
    for c in created:
        [delivery] = await log.history(rig.project_id, c.endpoint.endpoint_id)
        seen.extend((a.outcome, a.status_code, a.error) for a in delivery.log)
    assert seen == [(AttemptOutcome.REFUSED, None, REFUSAL)] * 3
    operator = caplog.text
    assert f"{internal} resolves to 127.0.0.1" in operator
    assert f"{unknown} does not resolve" in operator
    assert "resolves to 192.0.0.192" in operator
