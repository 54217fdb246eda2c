"""An op sent to /rpc/{chainId} is validated on the node while its two rate-limit windows are
counted in Redis (`service.late_limit`), when its project had room at its last decision; the
decision is waited for before the op is accounted and before the answer. Real devnet, real
Redis, an intake chain: a send the windows refuse after it ran is answered as if refused
first (429, or -32005 for the heavy window), and nothing of it is written or charged."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as redis
from sqlalchemy import func, select

from entryway.bundler.intake import IntakeBundler
from entryway.bundler.rpc_types import user_operation_json
from entryway.bundler.standalone import StandaloneSettings, build_bundler
from entryway.chain.rpc import EthClient
from entryway.devnet.devnet import Devnet
from entryway.domain.plans import PlanName
from entryway.service import late_limit, ratelimit
from entryway.service.app import create_app
from entryway.service.ratelimit import RateLimiter, parse_limits
from entryway.service.services import ChainRuntime, Services
from entryway.storage.engine import make_engine, migrate, sqlite_url
from entryway.storage.intake import OpIntakeStore
from entryway.storage.schema import op_intake, usage_events
from entryway.storage.store import Store
from tests.integration.api.test_rate_limits import clear_of_minute_edge, redis_url
from tests.integration.bundler.test_service_chain_routes import CHAIN, rpc, tenant
from tests.integration.harness import ETHER, Harness

LIMITS = {**parse_limits(""), PlanName.FREE: "40/minute"}
HEAVY = {**parse_limits(""), PlanName.FREE: "20/minute"}


class Served:
    def __init__(
        self, client: httpx.AsyncClient, services: Services, limiter: RateLimiter, url: str
    ) -> None:
        self.client, self.services, self.limiter, self.url = client, services, limiter, url
        self.started: list[bool] = []  # each send's: did it run before its decision?

    async def send(self, auth: dict[str, str], harness: Harness) -> httpx.Response:
        payer = harness.new_key()
        op = await harness.build_op(payer.address, b"")
        await harness.fund(op.sender, ETHER)
        op = harness.sign(op, payer)
        body = rpc("eth_sendUserOperation", user_operation_json(op), harness.deployment.entry_point)
        return await self.client.post(f"/rpc/{CHAIN}", headers=auth, json=body)

    async def charged(self) -> int:
        async with self.services.store.engine.connect() as db:
            return int(await db.scalar(select(func.count()).select_from(usage_events)) or 0)


@pytest.fixture
async def served(
    tmp_path: Path, devnet: Devnet, eth: EthClient, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Served]:
    url = await redis_url()
    await clear_of_minute_edge()
    # Between two sends a test builds and funds the next op on the node: on a loaded machine
    # that outlasts the second a decision's view of the room is trusted, and the next send
    # would wait for its decision. How long the view lasts is tested on its own
    # (tests/integration/test_rate_limit_redis.py).
    monkeypatch.setattr(ratelimit, "ROOM_FRESH_S", 60.0)
    engine = make_engine(sqlite_url(tmp_path))
    await migrate(engine)
    services = Services()
    limiter = RateLimiter(LIMITS, url, heavy_by_plan=HEAVY)
    services.attach(Store(engine, auth_cache_seconds=0), limiter=limiter)
    deployment = devnet.chains[0].deployment
    intake = OpIntakeStore(engine)
    bundler_rpc = await build_bundler(
        eth,
        StandaloneSettings(
            rpc_url=devnet.chains[0].rpc_url, entry_point=deployment.entry_point, executor_keys=()
        ),
        make=lambda *parts: IntakeBundler(*parts, intake=intake),
    )
    services.chains[CHAIN] = ChainRuntime(CHAIN, "", deployment, bundler_rpc, eth)
    transport = httpx.ASGITransport(app=create_app(services), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://svc.test") as client:
        out = Served(client, services, limiter, url)
        start = late_limit.start

        def started(*args: Any) -> bool:
            out.started.append(start(*args))
            return out.started[-1]

        monkeypatch.setattr(late_limit, "start", started)
        yield out
    await limiter.aclose()
    await engine.dispose()


async def test_an_op_is_validated_while_its_windows_are_counted(
    served: Served, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second send of a project with room is validated before its count comes back: the
    count is held until the validation has begun (a decision awaited first would never see
    it begin), and the op is then accepted and accounted as any other."""
    _, key = await tenant(served.services, PlanName.FREE, [CHAIN])
    auth = {"Authorization": f"Bearer {key}"}
    first = await served.send(auth, harness)
    assert "result" in first.json(), first.text
    assert served.started == [False]  # no decision seen yet for the project: it waits

    validating = asyncio.Event()
    bundler = served.services.chains[CHAIN].rpc.bundler
    validate = bundler.validator.validate

    async def seen_validating(*args: Any, **kwargs: Any) -> Any:
        validating.set()
        return await validate(*args, **kwargs)

    monkeypatch.setattr(bundler.validator, "validate", seen_validating)
    hit_with_heavy = served.limiter.hit_with_heavy
    held: list[bool] = []

    async def counted_after_validation_began(*args: Any) -> Any:
        try:
            await asyncio.wait_for(validating.wait(), 5)
            held.append(True)
        except TimeoutError:
            held.append(False)
        return await hit_with_heavy(*args)

    monkeypatch.setattr(served.limiter, "hit_with_heavy", counted_after_validation_began)
    second = await served.send(auth, harness)
    assert "result" in second.json(), second.text
    assert served.started == [False, True]
    assert held == [True]
    # The decision's headers are on the answer, as on any limited request.
    assert int(second.headers["RateLimit-Remaining"]) == 38
    assert await served.charged() == 2


async def test_a_send_its_project_window_refuses_late_is_429_and_writes_nothing(
    served: Served, harness: Harness
) -> None:
    """Another replica used up the project's window since this one last saw it: the send
    runs on the stale room, then gets the 429 a refused request gets, and neither its intake
    row nor its charge is written."""
    pid, key = await tenant(served.services, PlanName.FREE, [CHAIN])
    auth = {"Authorization": f"Bearer {key}"}
    assert "result" in (await served.send(auth, harness)).json()
    other = RateLimiter(LIMITS, served.url, heavy_by_plan=HEAVY)  # another API process
    try:
        granted, _ = await other.grant(PlanName.FREE, pid, 100)
    finally:
        await other.aclose()
    assert granted == 39
    refused = await served.send(auth, harness)
    assert served.started == [False, True]
    assert refused.status_code == 429, refused.text
    assert refused.json()["code"] == "rate_limited"
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert refused.headers["RateLimit-Remaining"] == "0"
    assert await served.charged() == 1
    async with served.services.store.engine.connect() as db:
        rows = await db.scalar(select(func.count()).select_from(op_intake))
    assert rows == 1
    # The view of the room is the Redis decision's now: the next send waits for its own.
    await served.send(auth, harness)
    assert served.started[-1] is False


async def test_a_send_its_heavy_window_refuses_late_is_limited_and_writes_nothing(
    served: Served, harness: Harness
) -> None:
    pid, key = await tenant(served.services, PlanName.FREE, [CHAIN])
    auth = {"Authorization": f"Bearer {key}"}
    assert "result" in (await served.send(auth, harness)).json()
    other = RateLimiter(LIMITS, served.url, heavy_by_plan=HEAVY)
    try:
        for _ in range(19):
            assert (await other.hit_heavy(PlanName.FREE, pid)).allowed
    finally:
        await other.aclose()
    refused = await served.send(auth, harness)
    assert served.started == [False, True]
    assert refused.status_code == 200
    error = refused.json()["error"]
    assert error["code"] == -32005 and "20 heavy calls" in error["message"], error
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert await served.charged() == 1


async def test_a_count_that_fails_while_the_send_ran_writes_nothing_and_answers_as_before(
    served: Served, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The count failing after the project's room was seen (an error the limiter does not
    serve through; Redis merely gone is counted in memory: test_redis_outage.py): the send
    that ran on that room is neither charged nor written, and its answer is the one a send
    that waited for the same failing count gets."""
    _, key = await tenant(served.services, PlanName.FREE, [CHAIN])
    auth = {"Authorization": f"Bearer {key}"}
    assert "result" in (await served.send(auth, harness)).json()

    async def redis_gone(*args: Any) -> Any:
        await asyncio.sleep(0.05)  # the validation is under way when it fails
        raise redis.ResponseError("the count failed")

    monkeypatch.setattr(served.limiter, "hit_with_heavy", redis_gone)
    ran_early = await served.send(auth, harness)
    _, other = await tenant(served.services, PlanName.FREE, [CHAIN])
    waited = await served.send({"Authorization": f"Bearer {other}"}, harness)
    assert served.started == [False, True, False]
    assert ran_early.status_code == waited.status_code >= 500, ran_early.text
    assert ran_early.json().get("code") == waited.json().get("code")
    assert await served.charged() == 1
    async with served.services.store.engine.connect() as db:
        assert await db.scalar(select(func.count()).select_from(op_intake)) == 1
