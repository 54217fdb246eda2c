"""Serving on while Redis does not answer.

Redis holds only counts that every API process shares (rate-limit windows, the dashboard's
sign-in throttles); losing them for a while is no reason to refuse every request. So when a
command fails to reach Redis (connection refused or reset, no answer within the client's
timeout), or Redis refuses to carry it out (out of memory under `maxmemory` with
`noeviction`, a read-only replica after a failover, a user its ACL does not allow the
command, a wrong password), the process counts in its own memory, as it does without Redis:
each replica then allows its own full limit. It says so once (a warning naming the cause),
tries a small counting write of its own in the background every PROBE_EVERY_S (a script that
sets a key for a second: what a count needs, where a PING would pass on a Redis that refuses
writes), and counts there again as soon as that succeeds (logged at info). No
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
# (a server loading its data or going down, a wrong password included) and the socket's own.
UNREACHABLE: tuple[type[BaseException], ...] = (redis.ConnectionError, redis.TimeoutError, OSError)
# What a command Redis was reached for and did not carry out raises besides: its error reply
# (OOM, READONLY, NOPERM...). Either way the count is not made there.
NOT_COUNTED: tuple[type[BaseException], ...] = (*UNREACHABLE, redis.RedisError)

PROBE_KEY = "entryway:probe"
# A write as a count makes one (a script setting a key), so that it fails where counts would.
_PROBE_SCRIPT = "return redis.call('SET', KEYS[1], '1', 'PX', 1000)"


class SharedRedis:
    """The Redis every process counts in, and whether this one counts there now or, while it
    does not answer, in its own memory (`down`)."""

    def __init__(self, client: redis.Redis, *, probe_every_s: float = PROBE_EVERY_S) -> None:
        self.client = client
        self.probe_every_s = probe_every_s
        self._probe: asyncio.Task[None] | None = None
        self.down = False

    def failed(self, exc: BaseException) -> None:
        """A command was not carried out by Redis (`NOT_COUNTED`): count in memory until a
        probe (`probe`) succeeds."""
        if self.down:
            return
        self.down = True
        cause = mask_secrets(str(exc)) or type(exc).__name__
        log.warning(
            "Redis %s (%s): rate limits and sign-in throttles are counted in this process "
            "until it counts again",
            "gave no answer" if isinstance(exc, UNREACHABLE) else "refused a command",
            cause,
        )
        self._probe = asyncio.get_running_loop().create_task(self._until_answered())

    async def probe(self) -> None:
        """A small write of the kind a count makes; raises what a count would (`NOT_COUNTED`)."""
        await self.client.eval(_PROBE_SCRIPT, 1, PROBE_KEY)

    async def _until_answered(self) -> None:
        while True:
            await asyncio.sleep(self.probe_every_s)
            try:
                await self.probe()
            except NOT_COUNTED:
                continue
            self.down = False
            log.info("Redis answers again: rate limits are shared through it again")
            return

    async def aclose(self) -> None:
        if self._probe is not None:
            self._probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probe
