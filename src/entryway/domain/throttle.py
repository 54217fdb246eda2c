"""Token buckets keyed by who is asking (a client address, an address and an account): each
key may make `burst` attempts at once and earns one more every `period_s / burst` seconds.
Pure and in memory; the clock is given, so the rules are tested without waiting."""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass

# Far more keys than live attackers and users; past it the longest-idle key is forgotten,
# so a flood of new addresses costs memory bounded by this, not by the flood.
MAX_KEYS = 50_000


@dataclass(frozen=True, slots=True)
class Rate:
    """`burst` attempts per `period_s` seconds."""

    burst: int
    period_s: float

    def __post_init__(self) -> None:
        if self.burst < 1 or self.period_s <= 0:
            raise ValueError("a rate needs at least one attempt over a positive period")

    @property
    def refill_s(self) -> float:
        """Seconds to earn one attempt back."""
        return self.period_s / self.burst


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


class Throttle:
    """One rate over many keys. `take(key)` spends an attempt: None when allowed, otherwise
    the whole seconds until the key has one again (the Retry-After to answer)."""

    def __init__(
        self,
        rate: Rate,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = MAX_KEYS,
    ) -> None:
        self.rate = rate
        self._clock = clock
        self._max_keys = max_keys
        self._buckets: OrderedDict[Hashable, _Bucket] = OrderedDict()

    def take(self, key: Hashable) -> int | None:
        now = self._clock()
        bucket = self._refilled(key, now)
        if bucket.tokens >= 1:
            bucket.tokens -= 1
            return None
        return max(1, math.ceil((1 - bucket.tokens) * self.rate.refill_s))

    def give_back(self, key: Hashable) -> None:
        """Return an attempt spent (a successful sign-in is no guess), up to the burst."""
        bucket = self._buckets.get(key)
        if bucket is not None:
            bucket.tokens = min(float(self.rate.burst), bucket.tokens + 1)

    def _refilled(self, key: Hashable, now: float) -> _Bucket:
        burst = float(self.rate.burst)
        bucket = self._buckets.pop(key, None)
        if bucket is None:
            bucket = _Bucket(burst, now)
        else:
            earned = max(0.0, now - bucket.at) / self.rate.refill_s
            bucket.tokens = min(burst, bucket.tokens + earned)
            bucket.at = now
        self._buckets[key] = bucket  # the most recently used key goes last
        while len(self._buckets) > self._max_keys:
            self._buckets.popitem(last=False)
        return bucket
