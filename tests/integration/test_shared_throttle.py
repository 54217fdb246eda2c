"""The sign-in throttles over Redis (the machine's server; skipped loudly without one, except
under CI): two guards, as two API processes, spend the same buckets, and Redis keeps no
address or email in clear."""

from __future__ import annotations

import secrets

import pytest
import redis.asyncio as redis

from entryway.dashboard.sign_in_guard import SignInGuard, SignInLimits, TooManyAttemptsError
from entryway.domain.throttle import Rate
from entryway.service.shared_redis import SharedRedis
from entryway.service.shared_throttle import RedisThrottle
from tests.integration.api.test_rate_limits import redis_url


async def test_two_processes_spend_one_bucket_and_get_the_same_retry_after() -> None:
    url = await redis_url()
    first, second = redis.from_url(url), redis.from_url(url)
    address = f"203.0.113.{secrets.randbelow(250)}-{secrets.token_hex(4)}"
    try:
        a, b = (RedisThrottle(Rate(3, 60), c, "test") for c in (first, second))
        assert [await a.take(address), await b.take(address), await a.take(address)] == [None] * 3
        assert await b.take(address) == 20  # one attempt earned back every 60/3 s
        assert await a.take(address) == 20  # a refused attempt costs nothing
        await b.give_back(address)
        assert await a.take(address) is None
        assert await a.take(f"{address}-other") is None  # another key, its own bucket
    finally:
        await first.aclose()
        await second.aclose()


async def test_guards_sharing_redis_bound_an_account_together_and_keep_no_email() -> None:
    url = await redis_url()
    clients = [redis.from_url(url), redis.from_url(url)]
    limits = SignInLimits(per_address=Rate(100, 60), per_account=Rate(4, 900))
    guards = [SignInGuard(limits, shared=SharedRedis(c)) for c in clients]
    email = f"alice-{secrets.token_hex(4)}@example.com"
    address = f"198.51.100.{secrets.randbelow(250)}"
    try:
        for n in range(4):
            await guards[n % 2].admit(address, email)
        with pytest.raises(TooManyAttemptsError) as refused:
            await guards[0].admit(address, email)
        assert refused.value.retry_after_s == 225
        await guards[1].signed_in(address, email)  # a right password gives one back
        await guards[0].admit(address, email)
        keys = [k.decode() async for k in clients[0].scan_iter("entryway:throttle:*")]
        assert keys and not any(email in k or address in k for k in keys)
    finally:
        for c in clients:
            await c.aclose()
