"""Redis gone, hung, refusing or back, under the rate limits and the sign-in throttles (the
machine's Redis behind a TCP proxy the test stops, starts and makes hang, or as a user whose ACL
the test makes refuse scripts; skipped loudly without one, except under CI): the process counts
in its own memory while Redis does not answer or refuses them, says so once, and shares the
counts again once it answers. No decision fails for it."""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from urllib.parse import urlsplit

import pytest
import redis.asyncio as redis

from entryway.dashboard.sign_in_guard import SignInGuard, SignInLimits, TooManyAttemptsError
from entryway.domain.plans import PlanName
from entryway.domain.throttle import Rate
from entryway.service.ratelimit import RateLimiter
from tests.integration.api.test_rate_limits import redis_url
from tests.integration.test_rate_limit_redis import HEAVY, LIMITS, clear_of_day_edge, project, seen
from tests.tcp_proxy import TcpProxy

SHARED_LOG = "entryway.service.shared_redis"


@pytest.fixture
async def proxy() -> AsyncIterator[TcpProxy]:
    parts = urlsplit(await redis_url())
    proxied = TcpProxy(parts.hostname or "127.0.0.1", parts.port or 6379)
    await proxied.start()
    yield proxied
    await proxied.stop()


async def through(proxy: TcpProxy, query: str = "") -> str:
    """The test's Redis URL, through the proxy."""
    database = urlsplit(await redis_url()).path
    return f"redis://127.0.0.1:{proxy.port}{database}{query}"


async def back(limiter: RateLimiter) -> None:
    assert limiter.shared is not None
    for _ in range(200):
        if not limiter.shared.down:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("Redis answers, and the limiter still counts alone")


async def test_a_hung_redis_holds_one_round_trip_to_its_timeout_and_none_after(
    proxy: TcpProxy,
) -> None:
    """Redis taking connections and never answering (paused, a network black hole): the
    decisions of the round trip that finds it out wait for the reply timeout, then are
    counted alone; the next ones never reach it."""
    proxy.hang = True
    limiter = RateLimiter(LIMITS, await through(proxy, "?socket_timeout=0.2"), heavy_by_plan=HEAVY)
    assert limiter.shared is not None
    limiter.shared.probe_every_s = 3600  # no probe while the test looks
    pid = project()
    try:
        decided = await asyncio.wait_for(
            asyncio.gather(*(limiter.hit(PlanName.FREE, pid) for _ in range(5))), 10
        )
        assert sorted(seen(d)[1] for d in decided) == [5, 6, 7, 8, 9]
        taken = proxy.connections
        assert taken >= 1
        later = [await limiter.hit(PlanName.FREE, pid) for _ in range(5)]
        assert [seen(d) for d in later] == [(True, 4), (True, 3), (True, 2), (True, 1), (True, 0)]
        assert proxy.connections == taken  # asked in memory, not of the hung Redis
    finally:
        await limiter.aclose()


class RefusingUser:
    """A user of the machine's Redis whose ACL may be made to refuse what a count runs
    (scripts): Redis answers it, with NOPERM, as it would answer OOM under `maxmemory` or
    READONLY on a replica. PING stays allowed, so a probe that only pinged would find it well."""

    def __init__(self, admin_url: str) -> None:
        self.name = f"entryway-test-{secrets.token_hex(4)}"
        self.password = secrets.token_hex(8)
        parts = urlsplit(admin_url)
        where = f"{parts.hostname or '127.0.0.1'}:{parts.port or 6379}{parts.path}"
        self.url = f"redis://{self.name}:{self.password}@{where}"
        self._admin = redis.from_url(admin_url)

    async def allow_counts(self, allowed: bool) -> None:
        scripts = "+@scripting" if allowed else "-@scripting"
        await self._admin.execute_command(
            "ACL", "SETUSER", self.name, "on", f">{self.password}", "~*", "+@all", scripts
        )

    async def aclose(self) -> None:
        await self._admin.execute_command("ACL", "DELUSER", self.name)
        await self._admin.aclose()


@dataclass
class FailingRedis:
    url: str  # the test Redis, by a way the test can make fail
    fail: Callable[[], Awaitable[None]]
    heal: Callable[[], Awaitable[None]]
    cause: str  # how the warning names the failure


@pytest.fixture(params=["gone", "refusing"])
async def failing(request: pytest.FixtureRequest, proxy: TcpProxy) -> AsyncIterator[FailingRedis]:
    """Redis that stops answering (its proxy stopped) or refuses the counts (an ACL; PING still
    allowed, so a probe that only pinged would find it well)."""
    if request.param == "gone":
        yield FailingRedis(await through(proxy), proxy.stop, proxy.start, "gave no answer")
        return
    user = RefusingUser(await redis_url())
    await user.allow_counts(True)
    fail, heal = partial(user.allow_counts, False), partial(user.allow_counts, True)
    yield FailingRedis(user.url, fail, heal, "refused a command (this user has no permissions")
    await user.aclose()


async def test_a_limiter_whose_redis_fails_counts_alone_then_shares_again(
    failing: FailingRedis, caplog: pytest.LogCaptureFixture
) -> None:
    """Redis gone, or answering every count with an error (out of memory, read-only, not
    allowed), is no 500: the process counts in memory, says why once, keeps counting alone
    while its probes fail, and shares the counts again once one goes through."""
    limiter = RateLimiter(LIMITS, failing.url, heavy_by_plan=HEAVY)
    direct = RateLimiter(LIMITS, await redis_url(), heavy_by_plan=HEAVY)
    assert limiter.shared is not None
    limiter.shared.probe_every_s = 0.05
    pid = project()
    caplog.set_level(logging.INFO, logger=SHARED_LOG)
    try:
        await clear_of_day_edge()
        assert seen(await limiter.hit(PlanName.FREE, pid, 3)) == (True, 7)  # in Redis
        await failing.fail()
        alone = [await limiter.hit(PlanName.FREE, pid, 4) for _ in range(3)]
        # Its own window, from nothing: 4 and 4 fit the 10, the third 4 does not.
        assert [seen(d) for d in alone] == [(True, 6), (True, 2), (False, 2)]
        first, heavy = await limiter.hit_with_heavy(PlanName.FREE, pid)
        assert seen(first) == (True, 1)
        assert heavy is not None and seen(heavy) == (True, 1)
        assert limiter.reserve_room(PlanName.FREE, pid) is False  # no early runs meanwhile
        await asyncio.sleep(0.5)  # ten probes: each failed, none taken for an answer
        assert limiter.shared.down
        lines = [r for r in caplog.records if r.name == SHARED_LOG]
        assert [r.levelno for r in lines] == [logging.WARNING], lines
        assert f"Redis {failing.cause}" in lines[0].getMessage()
        assert "counted in this process" in lines[0].getMessage()
        # Redis saw none of what was counted alone.
        assert seen(await direct.hit(PlanName.FREE, pid)) == (True, 6)

        await failing.heal()
        await back(limiter)
        assert seen(await limiter.hit(PlanName.FREE, pid)) == (True, 5)  # shared again
        lines = [r for r in caplog.records if r.name == SHARED_LOG]
        assert [r.levelno for r in lines] == [logging.WARNING, logging.INFO], lines
    finally:
        await limiter.aclose()
        await direct.aclose()


async def test_sign_in_throttles_hold_in_memory_while_redis_fails(failing: FailingRedis) -> None:
    limiter = RateLimiter(LIMITS, failing.url)
    assert limiter.shared is not None
    limiter.shared.probe_every_s = 3600
    guard = SignInGuard(
        SignInLimits(per_address=Rate(100, 60), per_account=Rate(3, 900)), shared=limiter.shared
    )
    email = f"alice-{secrets.token_hex(4)}@example.com"
    address = f"198.51.100.{secrets.randbelow(250)}"
    try:
        await guard.admit(address, email)  # in Redis
        await failing.fail()
        for _ in range(3):  # this process's own bucket, full
            await guard.admit(address, email)
        with pytest.raises(TooManyAttemptsError):
            await guard.admit(address, email)
        await guard.signed_in(address, email)  # gives back in memory, raising nothing
        await guard.admit(address, email)
        assert limiter.shared.down
    finally:
        await limiter.aclose()
