"""The RPC endpoints one chain is reached through, in the operator's order of preference,
and which of them failed recently."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(slots=True)
class Endpoint:
    url: str
    index: int  # its place in the configured list, from 0: logs name it, never its URL
    failed_until: float = 0.0  # on the pool's clock; in the past while healthy

    @property
    def label(self) -> str:
        """`#2`: which endpoint, for logs (hosted endpoints carry their API key in the URL)."""
        return f"#{self.index + 1}"


class EndpointPool:
    """Endpoints in the order to try them: healthy ones first, in the configured order (so
    the preferred endpoint takes over again once its cool-down ends), then failed ones,
    soonest-recovering first, so a call still has somewhere to go when all have failed."""

    def __init__(
        self,
        urls: Sequence[str],
        cooldown_s: float,
        clock: Callable[[], float] = time.monotonic,
        *,
        first_index: int = 0,
    ) -> None:
        """`first_index`: the place of `urls[0]` in the chain's configured list, when a pool
        holds only part of it (a start-up check of one URL), so logs number it as the rest."""
        if not urls:
            raise ValueError("a node client needs at least one RPC URL")
        self.endpoints = tuple(Endpoint(url, first_index + i) for i, url in enumerate(urls))
        self.cooldown_s = cooldown_s
        self._clock = clock

    def in_order(self) -> list[Endpoint]:
        now = self._clock()
        healthy = [e for e in self.endpoints if e.failed_until <= now]
        failed = sorted(
            (e for e in self.endpoints if e.failed_until > now), key=lambda e: e.failed_until
        )
        return healthy + failed

    def failed(self, endpoint: Endpoint) -> None:
        endpoint.failed_until = self._clock() + self.cooldown_s

    def answered(self, endpoint: Endpoint) -> None:
        endpoint.failed_until = 0.0
