"""Sliding-window counters kept in Redis, so that every API process behind one Redis counts
the same requests: the rate limits of `ratelimit.RateLimiter` when ENTRYWAY_REDIS_URL is set.

A decision is one run of a Lua script, which counts the hit and answers what the
RateLimit-* headers need; a request that draws on two windows (a heavy call: the project's
window, then the heavy calls') has both counted in that one run, in turn. The decisions a
process asks for while a round trip is under way share the next one (`RedisWindows`): each is
still taken whole, in arrival order, and two processes never read and write around each
other.

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

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis.asyncio as redis

PREFIX = "entryway:ratelimit:"
DECISIONS_PER_TRIP = 200  # at most, in one round trip (one script run holds Redis)

# KEYS: the windows, each decision's in turn. ARGV: for each decision, its number of windows,
# then for each window its limit, period in seconds and cost. Times are in microseconds, where
# doubles stay exact (the epoch in microseconds is far below 2^53). For each decision, returns
# how many of its windows were looked at, then for each of them 1 when the hit was counted
# (else 0), the requests left, and the microseconds until a request is freed; a window that
# refuses its hit ends that decision's turn, and its windows after it are neither counted nor
# answered. Decisions are taken in order, each as if alone.
_HIT = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local answers = {}
local k, a = 1, 1
while a <= #ARGV do
  local windows = tonumber(ARGV[a])
  a = a + 1
  local looked = #answers + 1
  table.insert(answers, 0)
  local refused = false
  for i = 0, windows - 1 do
    local key = KEYS[k + i]
    local limit = tonumber(ARGV[a + 3 * i])
    local period = tonumber(ARGV[a + 3 * i + 1]) * 1000000
    local cost = tonumber(ARGV[a + 3 * i + 2])
    if not refused then
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
      answers[looked] = answers[looked] + 1
      table.insert(answers, counted)
      table.insert(answers, math.max(limit - count, 0))
      table.insert(answers, math.ceil(wait))
      refused = counted == 0
    end
  end
  k = k + windows
  a = a + 3 * windows
end
return answers
"""


def _counted(values: Sequence[Any]) -> list[Counted]:
    """A decision's answers: (counted, requests left, microseconds until one is freed) each."""
    return [
        Counted(bool(values[i]), int(values[i + 1]), -(-int(values[i + 2]) // 1_000_000))
        for i in range(0, len(values), 3)
    ]


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
    """Sliding windows over Redis; a window is named by a string, its limit given per hit.

    A decision asked for while no round trip is under way is sent at once, by its caller.
    Those asked for while one is under way go together in the next (one EVALSHA for all of
    them, each decided in its turn as if alone), sent by a task of their own: a busy API
    process pays one round trip for many requests, not one each. Redis failing fails every
    decision of that round trip alike."""

    def __init__(self, client: redis.Redis) -> None:
        self._client = client
        # Sent by its digest (EVALSHA); loaded again by itself if Redis has forgotten it.
        self._script: Any = client.register_script(_HIT)
        self._trips = 0  # round trips under way
        self._trip_ended: asyncio.Event | None = None
        self._waiting: list[tuple[Sequence[Hit], asyncio.Future[list[Counted]]]] = []
        self._sender: asyncio.Task[None] | None = None

    async def hit(self, window: str, limit: int, period_s: int, cost: int) -> Counted:
        """Count `cost` requests in `window` (at most `limit` per `period_s` seconds), all
        or none."""
        (counted,) = await self.hit_in_turn([Hit(window, limit, period_s, cost)])
        return counted

    async def hit_in_turn(self, hits: Sequence[Hit]) -> list[Counted]:
        """Count each hit in its window, in one round trip, in turn until a window refuses
        its hit: the answers of the windows looked at (the refusing one last)."""
        if self._trips == 0 and not self._waiting:
            (answer,) = await self._trip([hits])
            return answer
        loop = asyncio.get_running_loop()
        decided: asyncio.Future[list[Counted]] = loop.create_future()
        self._waiting.append((hits, decided))
        if self._sender is None or self._sender.done() or self._sender.get_loop() is not loop:
            # Its own task: a caller that goes away does not stop the others' decisions.
            self._sender = loop.create_task(self._send_waiting())
        return await decided

    async def _send_waiting(self) -> None:
        """The waiting decisions, in round trips of their own once the one under way ends."""
        while self._waiting:
            while self._trips:
                self._trip_ended = self._trip_ended or asyncio.Event()
                await self._trip_ended.wait()
            group = self._waiting[:DECISIONS_PER_TRIP]
            del self._waiting[:DECISIONS_PER_TRIP]
            group = [(hits, decided) for hits, decided in group if not decided.done()]
            if not group:
                continue  # every caller went away: nothing to count
            try:
                answers = await self._trip([hits for hits, _ in group])
            except asyncio.CancelledError:  # stopping: no caller is left waiting
                for _, decided in group + self._waiting:
                    decided.cancel()
                self._waiting = []
                raise
            except Exception as exc:  # each caller fails as it would alone
                for _, decided in group:
                    if not decided.done():
                        decided.set_exception(exc)
                continue
            for (_, decided), answer in zip(group, answers, strict=True):
                if not decided.done():
                    decided.set_result(answer)

    async def _trip(self, decisions: Sequence[Sequence[Hit]]) -> list[list[Counted]]:
        """One round trip: each decision's answers, in order."""
        self._trips += 1
        try:
            answers = await self._script(
                keys=[PREFIX + h.window for hits in decisions for h in hits],
                args=[
                    a
                    for hits in decisions
                    for a in (len(hits), *(x for h in hits for x in (h.limit, h.period_s, h.cost)))
                ],
            )
        finally:
            self._trips -= 1
            if self._trips == 0 and self._trip_ended is not None:
                self._trip_ended.set()
                self._trip_ended = None
        out, at = [], 0
        for _ in decisions:
            looked = int(answers[at])
            out.append(_counted(answers[at + 1 : at + 1 + 3 * looked]))
            at += 1 + 3 * looked
        return out

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
