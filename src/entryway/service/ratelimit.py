"""Rate limits per project by plan, in sliding windows: in memory by default (the `limits`
library's sliding window counter), shared through Redis when ENTRYWAY_REDIS_URL is set
(several API processes then count together; `shared_window` runs the same arithmetic there in
one round trip a decision, under keys `entryway:ratelimit:*`).

A project's keys share its limits: minting more keys buys no more requests. A request over
the limit gets 429 with Retry-After; every limited answer carries the RateLimit-Limit /
RateLimit-Remaining / RateLimit-Reset headers (IETF draft names). Each call of a JSON-RPC batch
counts as one request (`grant`).

Heavy JSON-RPC calls (estimation, sending, `pm_*`: each simulates on the node or signs) also
draw on a second, tighter window per project (`hit_heavy`). They cost the node and the CPU far
more than a read but are not priced, so this window, not the price book, is what bounds them.

With Redis, a heavy call may run while its windows are being counted (`late_limit`): when
the project's last heavy decision this process saw, under ROOM_FRESH_S ago, left both windows
more than a tenth of their limit (`reserve_room`). Each such call takes one off that view until
the next decision, so a client over its limit soon waits for its decision again.

While Redis does not answer, each process counts in its own memory until it does
(`shared_redis`): a lost counter degrades the limits to per-process ones, it refuses no one."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass

import redis.asyncio as redis
from limits import RateLimitItem, parse
from limits.aio.storage import MemoryStorage
from limits.aio.strategies import SlidingWindowCounterRateLimiter

from entryway.domain.plans import PlanName
from entryway.service.shared_redis import (
    CONNECT_TIMEOUT_S,
    NOT_COUNTED,
    REPLY_TIMEOUT_S,
    SharedRedis,
)
from entryway.service.shared_window import Hit, RedisWindows

# Documented defaults (docs/api.md, "Rate limits"); every value is configuration.
DEFAULT_LIMITS: dict[PlanName, str] = {
    PlanName.FREE: "50/second",
    PlanName.STARTER: "100/second",
    PlanName.PRO: "500/second",
    PlanName.SCALE: "1000/second",
    PlanName.ENTERPRISE: "5000/second",
}
ROOM_FRESH_S = 1.0  # how long a decision's view of a project's room is trusted
ROOM_MARGIN = 10  # a call runs before its decision while more than 1/10 of a window is left

# Heavy calls (rpc_batch.is_heavy), per project, on top of the limit above.
# A fifth of the request limits: room for a wallet's estimate, stub, data and send per op.
DEFAULT_HEAVY_LIMITS: dict[PlanName, str] = {
    PlanName.FREE: "10/second",
    PlanName.STARTER: "20/second",
    PlanName.PRO: "100/second",
    PlanName.SCALE: "200/second",
    PlanName.ENTERPRISE: "1000/second",
}


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    limit: int
    remaining: int
    reset_seconds: int  # until the window frees a request

    def headers(self) -> dict[str, str]:
        headers = {
            "RateLimit-Limit": str(self.limit),
            "RateLimit-Remaining": str(self.remaining),
            "RateLimit-Reset": str(self.reset_seconds),
        }
        if not self.allowed:
            headers["Retry-After"] = str(max(self.reset_seconds, 1))
        return headers


def parse_limits(
    spec: str, defaults: Mapping[PlanName, str] = DEFAULT_LIMITS
) -> dict[PlanName, str]:
    """`FREE=10/second,PRO=100/second` over the defaults (ENTRYWAY_RATE_LIMITS, and
    ENTRYWAY_HEAVY_RATE_LIMITS over DEFAULT_HEAVY_LIMITS)."""
    chosen = dict(defaults)
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, _, value = part.partition("=")
        parse(value)  # refuse a bad value at start-up, not on the first request
        chosen[PlanName(name.strip().upper())] = value.strip()
    return chosen


def _redis_hit(item: RateLimitItem, kind: str, project_id: str, cost: int) -> Hit:
    window = f"{kind}:{project_id}:{item.amount}/{item.multiples}{item.GRANULARITY.name}"
    return Hit(window, item.amount, item.get_expiry(), cost)


@dataclass(slots=True)
class _Room:
    """A project's requests and heavy calls left, by the last heavy decision seen here."""

    requests: int
    heavy: int
    seen_at: float  # time.monotonic()


def _spare(left: int, limit: int) -> bool:
    return left > max(limit // ROOM_MARGIN, 1)


class RateLimiter:
    def __init__(
        self,
        limits_by_plan: Mapping[PlanName, str] | None = None,
        redis_url: str | None = None,
        *,
        heavy_by_plan: Mapping[PlanName, str] | None = None,
    ) -> None:
        self.items: dict[PlanName, RateLimitItem] = {
            plan: parse(value) for plan, value in (limits_by_plan or DEFAULT_LIMITS).items()
        }
        self.heavy_items: dict[PlanName, RateLimitItem] = {
            plan: parse(value) for plan, value in (heavy_by_plan or DEFAULT_HEAVY_LIMITS).items()
        }
        # Our own Redis pool, so that stopping the service closes its connections.
        # The URL's own `socket_timeout` / `socket_connect_timeout` win over these.
        self._pool = (
            redis.ConnectionPool.from_url(
                redis_url,
                socket_connect_timeout=CONNECT_TIMEOUT_S,
                socket_timeout=REPLY_TIMEOUT_S,
            )
            if redis_url
            else None
        )
        client = redis.Redis(connection_pool=self._pool) if self._pool is not None else None
        self._windows = RedisWindows(client) if client is not None else None
        # The Redis every process counts in (and whether it answers now); None: in memory.
        self.shared = SharedRedis(client) if client is not None else None
        # Counts without Redis: this process's own.
        self._memory = MemoryStorage()
        self._in_memory = SlidingWindowCounterRateLimiter(self._memory)
        self._room: dict[str, _Room] = {}  # by project: see `reserve_room`

    async def hit(self, plan: PlanName, project_id: str, cost: int = 1) -> Decision:
        """Count `cost` requests of the project, all or none: refused if they do not all fit
        the window."""
        return await self._hit(self.items[plan], "project", project_id, cost)

    async def hit_heavy(self, plan: PlanName, project_id: str) -> Decision:
        """Count one heavy call of the project in its own, tighter window."""
        return await self._hit(self.heavy_items[plan], "heavy", project_id, 1)

    async def hit_with_heavy(
        self, plan: PlanName, project_id: str
    ) -> tuple[Decision, Decision | None]:
        """`hit` then, if it was counted, `hit_heavy`: a single heavy call's two windows, in
        one round trip to Redis. The heavy decision is None when the first window refused."""
        windows = self._sharing()
        if windows is None:
            return await self._in_memory_with_heavy(plan, project_id)
        items = (self.items[plan], self.heavy_items[plan])
        hits = [
            _redis_hit(items[0], "project", project_id, 1),
            _redis_hit(items[1], "heavy", project_id, 1),
        ]
        try:
            answers = await windows.hit_in_turn(hits)
        except NOT_COUNTED as exc:
            self._unreachable(exc)
            return await self._in_memory_with_heavy(plan, project_id)
        first, *heavy = (
            Decision(c.allowed, item.amount, c.remaining, c.reset_seconds)
            for c, item in zip(answers, items, strict=False)
        )
        if heavy and heavy[0].allowed:
            self._room[project_id] = _Room(first.remaining, heavy[0].remaining, time.monotonic())
        else:
            self._room.pop(project_id, None)
        return first, (heavy[0] if heavy else None)

    def reserve_room(self, plan: PlanName, project_id: str) -> bool:
        """Whether a heavy call of the project may run before its windows are counted
        (`late_limit`): only with Redis (in memory the count takes no round trip), when the
        project's last heavy decision seen here, under ROOM_FRESH_S ago, left more than a
        tenth of both windows; the call then takes one off each."""
        room = self._room.get(project_id)
        if self._sharing() is None or room is None:
            return False
        if time.monotonic() - room.seen_at > ROOM_FRESH_S:
            del self._room[project_id]
            return False
        if not (
            _spare(room.requests, self.items[plan].amount)
            and _spare(room.heavy, self.heavy_items[plan].amount)
        ):
            return False
        room.requests -= 1
        room.heavy -= 1
        return True

    def _sharing(self) -> RedisWindows | None:
        """Redis's windows while decisions are asked of it: configured and not known down."""
        if self.shared is None or self.shared.down:
            return None
        return self._windows

    def _unreachable(self, exc: BaseException) -> None:
        if self.shared is not None:
            self.shared.failed(exc)

    async def _in_memory_with_heavy(
        self, plan: PlanName, project_id: str
    ) -> tuple[Decision, Decision | None]:
        first = await self._in_memory_hit(self.items[plan], "project", project_id, 1)
        if not first.allowed:
            return first, None
        return first, await self._in_memory_hit(self.heavy_items[plan], "heavy", project_id, 1)

    async def _hit(self, item: RateLimitItem, kind: str, project_id: str, cost: int) -> Decision:
        windows = self._sharing()
        if windows is not None:
            hit = _redis_hit(item, kind, project_id, cost)
            try:
                c = await windows.hit(hit.window, hit.limit, hit.period_s, hit.cost)
            except NOT_COUNTED as exc:
                self._unreachable(exc)
            else:
                return Decision(c.allowed, item.amount, c.remaining, c.reset_seconds)
        return await self._in_memory_hit(item, kind, project_id, cost)

    async def _in_memory_hit(
        self, item: RateLimitItem, kind: str, project_id: str, cost: int
    ) -> Decision:
        allowed = await self._in_memory.hit(item, kind, project_id, cost=cost)
        stats = await self._in_memory.get_window_stats(item, kind, project_id)
        reset = max(math.ceil(stats.reset_time - time.time()), 0)
        return Decision(allowed, item.amount, max(stats.remaining, 0), reset)

    async def grant(self, plan: PlanName, project_id: str, wanted: int) -> tuple[int, Decision]:
        """As many of `wanted` more requests as the window still holds, counted: the calls
        of a JSON-RPC batch past its first. One hit when they all fit (the usual case);
        near the limit, one at a time until the window is full."""
        if wanted < 1:
            raise ValueError("grant at least one request")
        decision = await self.hit(plan, project_id, cost=wanted)
        if decision.allowed:
            return wanted, decision
        granted = 0
        while granted < wanted:
            decision = await self.hit(plan, project_id)
            if not decision.allowed:
                break
            granted += 1
        return granted, decision

    async def reset(self) -> None:
        """Forget every count: in Redis, every process's."""
        self._room.clear()
        if self._windows is not None:
            await self._windows.reset()
        await self._memory.reset()

    async def aclose(self) -> None:
        if self.shared is not None:
            await self.shared.aclose()
        if self._pool is not None:
            await self._pool.aclose()
