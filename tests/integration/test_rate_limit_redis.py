"""Rate limits shared through Redis (the machine's server; skipped loudly without one, except
under CI): the same answers as the limits kept in memory, in one round trip a decision, one
count for every process, and a reset that forgets it. Each test counts for projects of its
own, so nothing that ran before, or runs beside it, weighs on its windows."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis.asyncio as redis
from redis.asyncio.connection import AbstractConnection

from entryway.domain.plans import PlanName
from entryway.service.ratelimit import DEFAULT_HEAVY_LIMITS, Decision, RateLimiter, parse_limits
from entryway.service.shared_window import PREFIX, RedisWindows
from tests.integration.api.test_rate_limits import redis_url
from tests.tcp_proxy import free_port

# A day: the tests never wait for a window to pass, and one never ends under them (see
# `clear_of_day_edge`).
LIMITS = {**parse_limits(""), PlanName.FREE: "10/day", PlanName.PRO: "4/day"}
HEAVY = {**DEFAULT_HEAVY_LIMITS, PlanName.FREE: "2/day"}


async def clear_of_day_edge(margin_s: float = 5.0) -> None:
    """Wait for the next day when this one (UTC) ends within `margin_s`: both kinds of
    window are whole days from the epoch, and one ending between two hits would free them."""
    left = 86400 - time.time() % 86400
    if left < margin_s:
        await asyncio.sleep(left + 0.05)


def project() -> str:
    return f"test-{secrets.token_hex(6)}"


@pytest.fixture
async def shared() -> AsyncIterator[RateLimiter]:
    limiter = RateLimiter(LIMITS, await redis_url(), heavy_by_plan=HEAVY)
    await clear_of_day_edge()
    yield limiter
    await limiter.aclose()


def seen(decision: Decision) -> tuple[bool, int]:
    assert decision.remaining >= 0
    assert 0 <= decision.reset_seconds <= 86400
    assert decision.limit in (10, 4, 2)
    return decision.allowed, decision.remaining


async def test_redis_answers_as_the_limits_kept_in_memory(shared: RateLimiter) -> None:
    memory = RateLimiter(LIMITS, heavy_by_plan=HEAVY)
    pid = project()
    answers: dict[str, list[tuple[int, int]]] = {}
    for name, limiter in (("memory", memory), ("redis", shared)):
        hits = [
            # 11 is over the limit whatever the count; 5 does not fit past 8 and is not
            # counted, so the 2 after it still fit.
            *[await limiter.hit(PlanName.FREE, pid, cost) for cost in (1, 3, 4, 5, 11, 2, 1)],
            await limiter.hit_heavy(PlanName.FREE, pid),
            await limiter.hit_heavy(PlanName.FREE, pid),
            await limiter.hit_heavy(PlanName.FREE, pid),
        ]
        # A batch's calls: all at once when they fit, else one at a time while they do.
        granted = [await limiter.grant(PlanName.PRO, pid, wanted) for wanted in (2, 3, 1)]
        answers[name] = [seen(d) for d in hits] + [(n, seen(d)[1]) for n, d in granted]
    assert answers["redis"] == answers["memory"]
    assert answers["redis"] == [
        (True, 9), (True, 6), (True, 2), (False, 2), (False, 2), (True, 0), (False, 0),
        (True, 1), (True, 0), (False, 0),
        (2, 2), (2, 0), (0, 0),
    ]  # fmt: skip

    # The reset: until the day ends, the same second on both.
    decisions = [await lim.hit(PlanName.FREE, project()) for lim in (memory, shared)]
    resets = [d.reset_seconds for d in decisions]
    assert abs(resets[0] - resets[1]) <= 1
    assert resets[1] == pytest.approx(86400 - time.time() % 86400, abs=2)


async def redis_now(client: redis.Redis) -> float:
    seconds, micros = await client.time()
    return float(seconds) + micros / 1_000_000


async def test_the_previous_window_weighs_by_its_share_still_in_the_sliding_window() -> None:
    client = redis.from_url(await redis_url())
    windows = RedisWindows(client)
    period, limit, before = 3600, 100, 60
    name = project()
    try:
        # A previous hour of 60 requests, as a process left it; not in an hour's last seconds.
        start = await redis_now(client)
        if period - start % period < 2:
            await asyncio.sleep(period - start % period + 0.05)
            start = await redis_now(client)
        window = int(start // period)
        await client.hset(PREFIX + name, mapping={"window": window - 1, "current": before})
        counted = await windows.hit(name, limit, period, 1)
        end = await redis_now(client)
        assert int(end // period) == window
        # `limits`: the previous count times the share of it still in the window, rounded
        # down, plus this window's.
        weighed = sorted(int(before * (period - t % period) / period) for t in (start, end))
        assert weighed[0] <= limit - counted.remaining - 1 <= weighed[1]
        assert counted.allowed
        # The previous window frees one request every period/60 s, before this window ends.
        assert 0 <= counted.reset_seconds <= period // before
        stored = await client.hgetall(PREFIX + name)
        assert stored == {b"window": str(window).encode(), b"current": b"1", b"previous": b"60"}
        assert 0 < await client.pttl(PREFIX + name) <= 2 * period * 1000

        # A count older than the previous window weighs nothing.
        await client.hset(PREFIX + name, mapping={"window": window - 2, "current": limit})
        full = await windows.hit(name, limit, period, limit)
        assert (full.allowed, full.remaining) == (True, 0)
    finally:
        await client.delete(PREFIX + name)
        await client.aclose()


class Sent:
    """The commands a process sends to Redis, and the writes that carry them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.commands: list[str] = []
        self.writes = 0
        send_command, send_packed = (
            AbstractConnection.send_command,
            AbstractConnection.send_packed_command,
        )

        async def command(conn: AbstractConnection, *args: Any, **kwargs: Any) -> None:
            self.commands.append(str(args[0]).upper())
            await send_command(conn, *args, **kwargs)

        async def packed(conn: AbstractConnection, *args: Any, **kwargs: Any) -> None:
            self.writes += 1
            await send_packed(conn, *args, **kwargs)

        monkeypatch.setattr(AbstractConnection, "send_command", command)
        monkeypatch.setattr(AbstractConnection, "send_packed_command", packed)

    async def during(self, decide: Callable[[], Any]) -> tuple[list[str], int]:
        self.commands, self.writes = [], 0
        await decide()
        return self.commands, self.writes


async def test_a_decision_is_one_round_trip(
    shared: RateLimiter, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid = project()
    await shared.hit(PlanName.PRO, pid)  # connects, and loads the script if Redis lacks it
    sent = Sent(monkeypatch)
    one = (["EVALSHA"], 1)
    assert await sent.during(lambda: shared.hit(PlanName.PRO, pid, cost=2)) == one
    assert await sent.during(lambda: shared.hit_heavy(PlanName.PRO, pid)) == one
    assert await sent.during(lambda: shared.grant(PlanName.PRO, pid, 1)) == one
    assert await sent.during(lambda: shared.hit(PlanName.PRO, pid)) == one  # refused


async def test_two_api_processes_count_together_and_a_reset_forgets() -> None:
    # The reset forgets every window of its Redis database: the test takes one of its own.
    url = urlsplit(await redis_url())._replace(path="/14").geturl()
    first, second = (RateLimiter(LIMITS, url) for _ in range(2))
    pid = project()
    try:
        await clear_of_day_edge()
        costs = (3, 3, 3, 3, 1)
        decisions = [
            await (first, second)[n % 2].hit(PlanName.FREE, pid, cost)
            for n, cost in enumerate(costs)
        ]
        assert [seen(d) for d in decisions] == [
            (True, 7), (True, 4), (True, 1), (False, 1), (True, 0),
        ]  # fmt: skip
        await second.reset()
        assert first.shared is not None
        client = first.shared.client
        assert [k async for k in client.scan_iter(match=f"{PREFIX}*")] == []
        assert seen(await first.hit(PlanName.FREE, pid, 10)) == (True, 0)
    finally:
        await first.aclose()
        await second.aclose()


async def test_a_heavy_calls_two_windows_are_counted_in_turn_in_one_round_trip(
    shared: RateLimiter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The project's window first, then the heavy calls' window, as the limits kept in memory
    count them; a refusal by the first leaves the second uncounted."""
    memory = RateLimiter(LIMITS, heavy_by_plan=HEAVY)
    pid = project()
    answers: dict[str, list[object]] = {}
    for name, limiter in (("memory", memory), ("redis", shared)):
        answers[name] = []
        for _ in range(12):  # FREE: 10 requests a day, 2 of them heavy
            first, heavy = await limiter.hit_with_heavy(PlanName.FREE, pid)
            answers[name].append((seen(first), None if heavy is None else seen(heavy)))
    assert answers["redis"] == answers["memory"]
    assert answers["redis"][:3] == [
        ((True, 9), (True, 1)),
        ((True, 8), (True, 0)),
        ((True, 7), (False, 0)),
    ]
    assert answers["redis"][10:] == [((False, 0), None), ((False, 0), None)]
    # What the refusals left uncounted: the heavy window still holds its 2 (refused).
    assert seen(await shared.hit_heavy(PlanName.FREE, pid)) == (False, 0)

    other = project()
    await shared.hit(PlanName.FREE, other)  # connects, and loads the script if Redis lacks it
    sent = Sent(monkeypatch)
    commands = await sent.during(lambda: shared.hit_with_heavy(PlanName.FREE, other))
    assert commands == (["EVALSHA"], 1)


async def test_decisions_asked_together_share_a_round_trip_each_taken_whole(
    shared: RateLimiter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twenty requests at once, heavy calls among them, on FREE's 10 a day (2 heavy): one
    decision each, in arrival order, as if alone, in two round trips (the first, sent at
    once; the others, all together after it)."""
    pid = project()
    await shared.hit(PlanName.FREE, project())  # connects, and loads the script if Redis lacks it
    sent = Sent(monkeypatch)

    async def asked(n: int) -> tuple[Decision, Decision | None] | Decision:
        if n in (3, 4, 5):
            return await shared.hit_with_heavy(PlanName.FREE, pid)
        return await shared.hit(PlanName.FREE, pid, cost=2 if n == 7 else 1)

    async def all_at_once() -> list[Any]:
        return list(await asyncio.gather(*(asked(n) for n in range(20))))

    sent.commands, sent.writes = [], 0
    answers = await all_at_once()
    assert (sent.commands, sent.writes) == (["EVALSHA", "EVALSHA"], 2)
    firsts = [a[0] if isinstance(a, tuple) else a for a in answers]
    # Counted in arrival order, each whole: 0-2 take 3, 3-5 one each (the third heavy is
    # refused but its request counted), 6 one, 7 two, 8 one: 10, then nothing fits.
    assert [seen(d) for d in firsts[:9]] == [
        (True, 9), (True, 8), (True, 7), (True, 6), (True, 5), (True, 4), (True, 3),
        (True, 1), (True, 0),
    ]  # fmt: skip
    assert all(seen(d) == (False, 0) for d in firsts[9:])
    heavies = [a[1] for a in answers[3:6] if isinstance(a, tuple)]
    assert [None if h is None else seen(h) for h in heavies] == [(True, 1), (True, 0), (False, 0)]


async def test_redis_failing_fails_every_decision_waiting_on_it() -> None:
    """Decisions that share a round trip to a Redis that is gone each get the error, as they
    would alone: none waits forever, none is granted (the limiter then counts them in its
    own memory: tests/integration/test_redis_outage.py)."""
    client = redis.from_url(f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there
    windows = RedisWindows(client)
    try:
        outcomes = await asyncio.wait_for(
            asyncio.gather(
                *(windows.hit(f"test:{project()}", 10, 60, 1) for _ in range(5)),
                return_exceptions=True,
            ),
            10,
        )
    finally:
        await client.aclose()
    assert all(isinstance(o, redis.ConnectionError) for o in outcomes), outcomes


async def test_a_caller_gone_while_waiting_for_its_trip_leaves_the_others_decided(
    shared: RateLimiter,
) -> None:
    """Requests waiting for the next shared round trip: one whose client went away is
    cancelled and not counted; the others are still decided (their trip is sent by a task of
    its own)."""
    pid = project()
    await shared.hit(PlanName.FREE, project())  # connects, and loads the script if Redis lacks it
    asked = [asyncio.create_task(shared.hit(PlanName.FREE, pid)) for _ in range(4)]
    await asyncio.sleep(0)  # the first is on its way; the others wait for the next trip
    asked[1].cancel()
    done = await asyncio.wait_for(asyncio.gather(*asked, return_exceptions=True), 10)
    assert isinstance(done[1], asyncio.CancelledError)
    decided = [d for n, d in enumerate(done) if n != 1]
    assert all(isinstance(d, Decision) and d.allowed for d in decided), decided
    assert sorted(d.remaining for d in decided if isinstance(d, Decision)) == [7, 8, 9]


async def test_a_heavy_call_runs_before_its_decision_only_while_its_project_has_room(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`reserve_room`: with Redis, after a heavy decision that left more than a tenth of both
    windows, for ROOM_FRESH_S; each call reserved takes one off that view, so a burst soon
    waits for its decisions again; a refusal, or the limits kept in memory, never."""
    from entryway.service import ratelimit

    limits = {**parse_limits(""), PlanName.FREE: "100/day"}
    heavy = {**DEFAULT_HEAVY_LIMITS, PlanName.FREE: "30/day"}
    memory = RateLimiter(limits, heavy_by_plan=heavy)
    pid = project()
    await memory.hit_with_heavy(PlanName.FREE, pid)
    assert not memory.reserve_room(PlanName.FREE, pid)  # no round trip to spare

    limiter = RateLimiter(limits, await redis_url(), heavy_by_plan=heavy)
    await clear_of_day_edge()
    try:
        assert not limiter.reserve_room(PlanName.FREE, pid)  # nothing seen yet
        await limiter.hit_with_heavy(PlanName.FREE, pid)  # 99 requests and 29 heavy left
        reserved = 0
        while limiter.reserve_room(PlanName.FREE, pid):
            reserved += 1
        assert reserved == 29 - 3  # down to a tenth of the heavy window (3), not below
        await limiter.hit_with_heavy(PlanName.FREE, pid)  # a decision: the view is Redis's
        assert limiter.reserve_room(PlanName.FREE, pid)

        now = time.monotonic()
        later = now + ratelimit.ROOM_FRESH_S + 1
        monkeypatch.setattr(time, "monotonic", lambda: later)
        assert not limiter.reserve_room(PlanName.FREE, pid)  # too old to go by
        monkeypatch.undo()

        other = project()
        for _ in range(30):
            await limiter.hit_with_heavy(PlanName.FREE, other)
        first, refused = await limiter.hit_with_heavy(PlanName.FREE, other)
        assert first.allowed and refused is not None and not refused.allowed
        assert not limiter.reserve_room(PlanName.FREE, other)
    finally:
        await limiter.aclose()
