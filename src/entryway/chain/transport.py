"""JSON-RPC payloads over HTTP to a chain's endpoints, with the retry policy applied.

aiohttp, not httpx, talks to the node: its C HTTP parser costs a fifth of the CPU per call,
and the service makes many small calls (estimation, receipts) and a few large ones
(validation traces of a megabyte or more).

Rate limits. A hosted provider answers HTTP 429 (often with `Retry-After`) when a call
comes over its budget. The 429 is the provider's gateway refusing the call before any node
ran it, so the call is sent again once the wait it asks for is over, and that holds for a
write too: a transaction refused by a rate limit never reached the mempool, and waiting
then sending it again is the only way it lands at all. The wait is honoured only within
the call's deadline (a caller is never held past it: the call fails as rate limited
instead), and a write moves on to the next endpoint after its tries, as it does when it
could not connect. Any other failure of a write after it left this host (a timeout, a
dropped connection, a 5xx) is never sent again: its fate is unknown.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import aiohttp
import orjson

from entryway.chain.endpoints import Endpoint, EndpointPool
from entryway.chain.outage import NodeOutages
from entryway.chain.retry import RetryPolicy
from entryway.errors import EntrywayError

log = logging.getLogger("entryway.chain")

_JSON = {"content-type": "application/json"}
KEEPALIVE_S = 4.0
Decoder = Callable[[bytes], Any]

# The connection was never made, so the request never left this host.
_NOT_CONNECTED = (
    aiohttp.ClientConnectorError,  # refused, unreachable, DNS, TLS handshake
    aiohttp.ConnectionTimeoutError,  # the connect step timed out
)


# What a client is told when no endpoint answered: the condition, never a host or a URL.
NODE_UNREACHABLE = "the chain's node is unreachable; try again shortly"
NODE_MALFORMED = "the chain's node answered malformed JSON-RPC; try again shortly"
NODE_RATE_LIMITED = "the chain's node is rate limiting this service; try again shortly"


class RpcTransportError(EntrywayError):
    """No endpoint of the node answered with JSON-RPC. The message names the condition and
    nothing else (it reaches API clients); which endpoint failed, and how, is logged once per
    outage (see `NodeOutages`)."""

    def __init__(self, message: str = NODE_UNREACHABLE) -> None:
        super().__init__(message)


class _NoAnswerError(Exception):
    """One exchange with one endpoint that brought back no JSON-RPC answer."""

    def __init__(
        self,
        detail: str,
        *,
        retryable: bool,
        delivered: bool = True,
        timed_out: bool = False,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        self.delivered = delivered  # the endpoint may have received (and acted on) the call
        self.retryable = retryable
        self.timed_out = timed_out
        self.retry_after_s = retry_after_s  # a rate limit's wait, when it named one

    @property
    def rate_limited(self) -> bool:
        return self.retry_after_s is not None


class NodeTransport:
    """Posts payloads to the first endpoint able to answer them. One connection pool for
    all endpoints; close it when done."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        timeout: float,
        connect_timeout: float,
        retry: RetryPolicy,
        chain_id: int | None = None,
        first_index: int = 0,
    ) -> None:
        self.pool = EndpointPool(urls, retry.cooldown_s, first_index=first_index)
        self.outages = NodeOutages(chain_id)
        self.retry = retry
        # A bounded connect step tells "never connected" (safe to send elsewhere) apart
        # from a timeout after the request went out (maybe acted on).
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._timeout = self._deadline(timeout)
        self._session: aiohttp.ClientSession | None = None  # made in the loop that uses it
        self.failures = 0  # exchanges that brought no answer, for the service's metrics
        self.answering = first_index  # the index of the endpoint that answered last

    def _deadline(self, timeout: float) -> aiohttp.ClientTimeout:
        return aiohttp.ClientTimeout(total=timeout, sock_connect=min(self.connect_timeout, timeout))

    @property
    def unreachable(self) -> bool:
        """Every endpoint's last exchange brought no answer (an outage not over yet)."""
        return all(self.outages.is_down(e.index) for e in self.pool.endpoints)

    async def post(
        self,
        payload: object,
        *,
        idempotent: bool,
        deadline_s: float | None = None,
        decode: Decoder = orjson.loads,
    ) -> Any:
        """The decoded JSON-RPC answer to `payload`, from the first endpoint that gives one.
        `deadline_s`, when given, bounds each exchange instead of the transport's timeout;
        `decode` reads the answer's bytes (a caller may read a large answer its own way).

        A call that is not `idempotent` (a write, or anything off the policy's allowlist) is
        never sent twice: it goes to the first endpoint in order, and moves to the next
        only if the connection failed before the request could leave this host (refused,
        DNS, connect timeout). Any later failure (a timeout while waiting for the answer, a
        dropped connection, an HTTP error) raises at once, because the endpoint may have
        received it: a transaction sent again elsewhere could land twice.
        """
        body = orjson.dumps(payload)
        deadline = self._timeout if deadline_s is None else self._deadline(deadline_s)
        # A rate limit's wait must end within this (see the module's docstring).
        until = time.monotonic() + (self.timeout if deadline_s is None else deadline_s)
        rate_limited = False
        for endpoint in self.pool.in_order():
            try:
                return await self._through(
                    endpoint, body, deadline, idempotent=idempotent, decode=decode, until=until
                )
            except _NoAnswerError as failure:
                rate_limited = failure.rate_limited
                self.pool.failed(endpoint)
                self.failures += 1
                # Once per outage at warning (the tracker), every time at debug.
                self.outages.failed(endpoint.index, failure.detail)
                log.debug("node endpoint %s failed: %s", endpoint.label, failure.detail)
                if failure.delivered and not idempotent:
                    break
        raise RpcTransportError(NODE_RATE_LIMITED if rate_limited else NODE_UNREACHABLE)

    async def _through(
        self,
        endpoint: Endpoint,
        body: bytes,
        deadline: aiohttp.ClientTimeout,
        *,
        idempotent: bool,
        decode: Decoder,
        until: float,
    ) -> Any:
        """One endpoint's turn: up to `attempts` tries, with backoff between them (at least
        the wait a rate limit asks for, and never past `until`)."""
        attempt = 1
        while True:
            try:
                answer = await self._exchange(endpoint.url, body, deadline, decode)
            except _NoAnswerError as failure:
                if (
                    attempt >= self.retry.attempts
                    or not failure.retryable
                    or failure.timed_out
                    or (failure.delivered and not idempotent)
                ):
                    raise
                delay = max(self.retry.backoff(attempt), failure.retry_after_s or 0.0)
                if time.monotonic() + delay > until:
                    raise
                # A retry that then succeeds is routine (a node starting, a 429): debug only;
                # an endpoint that gives up is the warning above.
                log.debug(
                    "node endpoint %s: %s; retry %d in %.2fs",
                    endpoint.label,
                    failure.detail,
                    attempt,
                    delay,
                )
                await asyncio.sleep(delay)
                attempt += 1
                continue
            self.pool.answered(endpoint)
            self.outages.answered(endpoint.index)
            self.answering = endpoint.index
            return answer

    async def _exchange(
        self, url: str, body: bytes, deadline: aiohttp.ClientTimeout, decode: Decoder
    ) -> Any:
        if self._session is None:
            # Idle connections are dropped before common servers drop them (uvicorn after
            # 5 s): a request written into a connection the server is closing fails.
            connector = aiohttp.TCPConnector(keepalive_timeout=KEEPALIVE_S)
            self._session = aiohttp.ClientSession(timeout=self._timeout, connector=connector)
        try:
            async with self._session.post(
                url, data=body, headers=_JSON, timeout=deadline
            ) as response:
                status, content = response.status, await response.read()
                retry_after = response.headers.get("Retry-After")
        except _NOT_CONNECTED as exc:
            raise _NoAnswerError(
                _describe(exc),
                retryable=True,
                delivered=False,
                timed_out=isinstance(exc, TimeoutError),
            ) from exc
        except TimeoutError as exc:
            raise _NoAnswerError("timed out", retryable=True, timed_out=True) from exc
        except (aiohttp.ClientError, OSError) as exc:
            # A bare OSError (a reset mid-write) is a dropped connection like any other.
            raise _NoAnswerError(_describe(exc), retryable=True) from exc
        return self._answer(status, content, decode, retry_after)

    def _answer(
        self,
        status: int,
        content: bytes,
        decode: Decoder = orjson.loads,
        retry_after: str | None = None,
    ) -> Any:
        """The decoded body, if it is a JSON-RPC answer. One carried by an HTTP error status
        is still the node's answer (a revert must not be retried), except under 429:
        providers explain their rate limits in a JSON-RPC error, and the call never ran."""
        retryable = status in self.retry.retry_statuses
        if status == 429:
            raise _NoAnswerError(
                "HTTP 429, rate limited",
                retryable=retryable,
                delivered=False,  # refused before it ran: see the module's docstring
                retry_after_s=retry_after_seconds(retry_after),
            )
        try:
            decoded = decode(content)
        except orjson.JSONDecodeError:
            decoded = None
        if not _is_json_rpc(decoded):
            raise _NoAnswerError(f"HTTP {status}, no JSON-RPC answer", retryable=retryable)
        return decoded

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def retry_after_seconds(header: str | None) -> float:
    """The wait a `Retry-After` header asks for, in seconds (delay-seconds or an HTTP
    date); 0 when it names none or one in the past."""
    if not header:
        return 0.0
    header = header.strip()
    if header.isdigit():
        return float(header)
    try:
        when = email.utils.parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return 0.0
    return max(when.timestamp() - time.time(), 0.0)


def _describe(exc: Exception) -> str:
    """The error's kind and the system's reason, never its URL (which may hold a key) nor
    its address: the reason comes from the error number alone, since the text asyncio gives
    ("Connect call failed ('10.0.0.5', 8545)") names the host and port."""
    errno = exc.errno if isinstance(exc, OSError) else None
    reason = os.strerror(errno) if errno else None
    return f"{type(exc).__name__}: {reason}" if reason else type(exc).__name__


def _is_json_rpc(decoded: Any) -> bool:
    if isinstance(decoded, list):  # a batch's answers
        return True
    return isinstance(decoded, dict) and ("result" in decoded or "error" in decoded)
