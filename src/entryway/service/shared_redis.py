"""Serving on while Redis does not answer.

Redis holds only counts that every API process shares (rate-limit windows, the dashboard's
sign-in throttles); losing them for a while is no reason to refuse every request. So when a
command fails to reach Redis (refused, reset, no answer within the client's timeout), the
process counts in its own memory, as it does without Redis: each replica then allows its
own full limit. It says so once (a warning), asks Redis again in the background with PING
every PROBE_EVERY_S, and counts there again as soon as it answers (logged at info). No
request waits on a Redis that is known to be down; at most the requests of the round trip
that found it down wait, up to the client's timeout (CONNECT_TIMEOUT_S and REPLY_TIMEOUT_S
unless the URL's `socket_connect_timeout` / `socket_timeout` say otherwise).

Readiness reports Redis as degraded, not failing, meanwhile (service/readiness_checks.py):
a load balancer that took every replica out over a lost counter would turn a small outage
into a whole one."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import redis.asyncio as redis

from entryway.observability.redaction import mask_secrets

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 1.0
REPLY_TIMEOUT_S = 1.0
PROBE_EVERY_S = 1.0

# What a command that did not reach Redis raises: redis-py's connection and timeout errors
# (a server loading its data or going down included) and the socket's own.
UNREACHABLE: tuple[type[BaseException], ...] = (redis.ConnectionError, redis.TimeoutError, OSError)


class SharedRedis:
    """The Redis every process counts in, and whether this one counts there now or, while it
    does not answer, in its own memory (`down`)."""

    def __init__(self, client: redis.Redis, *, probe_every_s: float = PROBE_EVERY_S) -> None:
        self.client = client
        self.probe_every_s = probe_every_s
        self._probe: asyncio.Task[None] | None = None
        self.down = False

    def failed(self, exc: BaseException) -> None:
        """A command did not reach Redis: count in memory until a PING is answered."""
        if self.down:
            return
        self.down = True
        log.warning(
            "Redis gave no answer (%s): rate limits and sign-in throttles are counted in this "
            "process until it answers again",
            mask_secrets(str(exc)) or type(exc).__name__,
        )
        self._probe = asyncio.get_running_loop().create_task(self._until_answered())

    async def _until_answered(self) -> None:
        while True:
            await asyncio.sleep(self.probe_every_s)
            try:
                await self.client.ping()
            except UNREACHABLE:
                continue
            self.down = False
            log.info("Redis answers again: rate limits are shared through it again")
            return

    async def aclose(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probe
