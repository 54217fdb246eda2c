"""Token buckets kept in Redis, so that every API process behind one Redis counts the same
attempts: the sign-in throttles of docs/security.md. The bucket's arithmetic is the one of
`domain.throttle.Throttle` (a burst, one attempt earned back every `period / burst`), run in
one Lua script on Redis's own clock, so two processes never read and write around each other.

Keys are `entryway:throttle:<name>:<sha256 of the key>`: no client address or email is kept
in Redis in clear. Each bucket expires once it would be full again."""

from __future__ import annotations

import hashlib
from typing import Any

import redis.asyncio as redis

from entryway.domain.throttle import Rate

# ARGV: burst, seconds per attempt earned, "take" or "give". Returns 0 when an attempt was
# taken (or given back), else the whole seconds until one is earned.
_BUCKET = """
local burst = tonumber(ARGV[1])
local refill = tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local saved = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(saved[1]) or burst
local at = tonumber(saved[2]) or now
if now > at then tokens = math.min(burst, tokens + (now - at) / refill) end
local wait = 0
if ARGV[3] == 'give' then
  tokens = math.min(burst, tokens + 1)
elseif tokens >= 1 then
  tokens = tokens - 1
else
  wait = math.max(1, math.ceil((1 - tokens) * refill))
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) * refill * 1000) + 1000)
return wait
"""


class RedisThrottle:
    """`Throttle`'s `take` and `give_back`, over Redis; keys are strings."""

    def __init__(self, rate: Rate, client: redis.Redis, name: str) -> None:
        self.rate = rate
        self._name = name
        self._script: Any = client.register_script(_BUCKET)

    def _key(self, key: str) -> str:
        digest = hashlib.sha256(key.encode()).hexdigest()
        return f"entryway:throttle:{self._name}:{digest}"

    async def _run(self, key: str, action: str) -> int:
        args = [self.rate.burst, repr(self.rate.refill_s), action]
        return int(await self._script(keys=[self._key(key)], args=args))

    async def take(self, key: str) -> int | None:
        wait = await self._run(key, "take")
        return wait or None

    async def give_back(self, key: str) -> None:
        await self._run(key, "give")
