"""Sliding-window counters kept in Redis, so that every API process behind one Redis counts
the same requests: the rate limits of `ratelimit.RateLimiter` when ENTRYWAY_REDIS_URL is set.

A decision is one round trip: one Lua script counts the hit and answers what the RateLimit-*
headers need; a request that draws on two windows (a heavy call: the project's window, then
the heavy calls') has both counted in that one round trip, in turn. A request pays for its
rate limit in one turn of the event loop, and two processes never read and write around
each other.

The arithmetic is the sliding window counter of the `limits` library, which the limits kept
in memory still use, so both give the same answers. Windows are whole periods counted from
the epoch; a window's count is its own hits plus the previous window's, weighed by the
fraction of the previous window still inside the sliding window (`period` seconds back from
now), rounded down. A hit of `cost` requests is counted whole when the rounded count plus
`cost` is within the limit, and not at all otherwise: a refused hit writes nothing. The
clock is Redis's own, so hosts whose clocks drift apart still agree on the windows.

Keys are `entryway:ratelimit:<window>`, one hash per limit and project (for instance
`entryway:ratelimit:project:<project id>:50/1second`) holding the window's number, its count
and the previous window's count; each expires once its count can no longer weigh on a
decision. The count is ephemeral: losing it (a Redis restart) only grants a fresh window."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis.asyncio as redis

PREFIX = "entryway:ratelimit:"

# KEYS: the windows, counted in turn. ARGV: for each, its limit, period in seconds and cost.
# Times are in microseconds, where doubles stay exact (the epoch in microseconds is far below
# 2^53). For each window looked at, returns 1 when the hit was counted (else 0), the requests
# left, and the microseconds until a request is freed; a window that refuses its hit ends the
# turn, and the windows after it are neither counted nor answered.
_HIT = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local answers = {}
for i, key in ipairs(KEYS) do
  local limit = tonumber(ARGV[3 * i - 2])
  local period = tonumber(ARGV[3 * i - 1]) * 1000000
  local cost = tonumber(ARGV[3 * i])
  local window = math.floor(now / period)
  local left = period - (now - window * period)
  local saved = redis.call('HMGET', key, 'window', 'current', 'previous')
  local current, previous = 0, 0
  if tonumber(saved[1]) == window then
    current = tonumber(saved[2]) or 0
    previous = tonumber(saved[3]) or 0
  elseif tonumber(saved[1]) == window - 1 then
    previous = tonumber(saved[2]) or 0
  end
  local count = math.floor(previous * left / period) + current
  local counted = 0
  if count + cost <= limit then
    counted = 1
    current = current + cost
    count = count + cost
    redis.call('HSET', key, 'window', string.format('%d', window),
      'current', current, 'previous', previous)
    redis.call('PEXPIRE', key, math.ceil((left + period) / 1000))
  end
  local wait = 0
  if current > 0 then wait = left % period end
  if previous > 0 then
    local drop = left % (period / previous)
    if current == 0 or drop < wait then wait = drop end
  end
  table.insert(answers, counted)
  table.insert(answers, math.max(limit - count, 0))
  table.insert(answers, math.ceil(wait))
  if counted == 0 then break end
end
return answers
"""


@dataclass(frozen=True, slots=True)
class Hit:
    window: str
    limit: int  # requests per period
    period_s: int
    cost: int


@dataclass(frozen=True, slots=True)
class Counted:
    allowed: bool
    remaining: int
    reset_seconds: int  # until the window frees a request


class RedisWindows:
    """Sliding windows over Redis; a window is named by a string, its limit given per hit."""

    def __init__(self, client: redis.Redis) -> None:
        self._client = client
        # Sent by its digest (EVALSHA); loaded again by itself if Redis has forgotten it.
        self._script: Any = client.register_script(_HIT)

    async def hit(self, window: str, limit: int, period_s: int, cost: int) -> Counted:
        """Count `cost` requests in `window` (at most `limit` per `period_s` seconds), all
        or none."""
        (counted,) = await self.hit_in_turn([Hit(window, limit, period_s, cost)])
        return counted

    async def hit_in_turn(self, hits: Sequence[Hit]) -> list[Counted]:
        """Count each hit in its window, in one round trip, in turn until a window refuses
        its hit: the answers of the windows looked at (the refusing one last)."""
        answers = await self._script(
            keys=[PREFIX + h.window for h in hits],
            args=[a for h in hits for a in (h.limit, h.period_s, h.cost)],
        )
        return [
            Counted(bool(answers[i]), int(answers[i + 1]), -(-int(answers[i + 2]) // 1_000_000))
            for i in range(0, len(answers), 3)
        ]

    async def reset(self) -> None:
        """Forget every window (and so every count), in batches: never one long command."""
        batch: list[bytes] = []
        async for key in self._client.scan_iter(match=f"{PREFIX}*", count=1000):
            batch.append(key)
            if len(batch) == 1000:
                await self._client.unlink(*batch)
                batch.clear()
        if batch:
            await self._client.unlink(*batch)
