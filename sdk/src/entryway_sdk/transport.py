"""HTTP to the service (REST with the API key, JSON-RPC at /rpc/{chainId}) and JSON-RPC to the
caller's own node, over one shared `httpx.AsyncClient`. Retries follow one `RetryPolicy`:
idempotent requests (GETs and read-only JSON-RPC methods) are retried, and any request the
service refused for a rate limit (429, or JSON-RPC -32005): nothing of it ran."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

from entryway_sdk._hex import hex_bytes, quantity, to_hex
from entryway_sdk.errors import (
    ApiError,
    EntrywayError,
    JsonRpcError,
    NetworkConnectionError,
    RateLimitedError,
    problem_error,
    rpc_error,
)

T = TypeVar("T")
READ_METHODS = frozenset(
    {
        "eth_chainId",
        "eth_call",
        "eth_getCode",
        "eth_getBalance",
        "eth_blockNumber",
        "eth_getBlockByNumber",
        "eth_getTransactionReceipt",
        "eth_supportedEntryPoints",
        "eth_estimateUserOperationGas",
        "eth_getUserOperationByHash",
        "eth_getUserOperationReceipt",
        "entryway_getUserOperationGasPrice",
        "entryway_getUserOperationStatus",
        "pm_getPaymasterStubData",  # holds nothing (pm_getPaymasterData holds credits)
    }
)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often an idempotent request is retried after a transport error, a 429 (after its
    Retry-After) or a 502/503/504, with exponential backoff from `backoff` seconds; and any
    request refused for a rate limit (429, JSON-RPC -32005), which ran nothing."""

    attempts: int = 3
    backoff: float = 0.25
    max_delay: float = 5.0
    statuses: frozenset[int] = field(default_factory=lambda: frozenset({429, 502, 503, 504}))
    methods: frozenset[str] = READ_METHODS

    def delay(self, attempt: int, error: Exception | None) -> float:
        if isinstance(error, RateLimitedError | JsonRpcError) and error.retry_after is not None:
            return min(error.retry_after, self.max_delay)
        return float(min(self.backoff * 2**attempt, self.max_delay))


LIMIT_EXCEEDED = -32005  # a JSON-RPC call refused for a rate limit before it ran


class _Retryable(Exception):  # noqa: N818 - internal signal, never escapes
    def __init__(self, error: Exception, *, unrun: bool = False) -> None:
        self.error = error
        self.unrun = unrun  # refused before anything ran: safe to send again, whatever it is


async def _with_retries(
    policy: RetryPolicy, idempotent: bool, attempt_once: Callable[[], Awaitable[T]]
) -> T:
    for attempt in range(policy.attempts):
        try:
            return await attempt_once()
        except _Retryable as signal:
            if not (idempotent or signal.unrun) or attempt + 1 >= policy.attempts:
                raise signal.error from None
            await asyncio.sleep(policy.delay(attempt, signal.error))
    raise AssertionError("unreachable")


class ServiceApi:
    """The Entryway service at `base_url`, authenticated with `api_key`."""

    def __init__(
        self, http: httpx.AsyncClient, base_url: str, api_key: str, retry: RetryPolicy
    ) -> None:
        self.http = http
        self.base_url = base_url.rstrip("/")
        self.retry = retry
        self._headers = {"Authorization": f"Bearer {api_key}", "Accept": "application/json"}
        self._ids = itertools.count(1)

    async def _send(
        self, method: str, path: str, headers: Mapping[str, str] | None = None, **kw: Any
    ) -> httpx.Response:
        try:
            response = await self.http.request(
                method, self.base_url + path, headers={**self._headers, **(headers or {})}, **kw
            )
        except httpx.TransportError as exc:
            raise _Retryable(
                NetworkConnectionError(
                    f"the service at {self.base_url} did not answer: {exc}",
                    code="service_unreachable",
                )
            ) from exc
        if response.status_code >= 400:
            error = problem_error(response.status_code, _json(response), response.headers)
            if response.status_code in self.retry.statuses:
                raise _Retryable(error, unrun=response.status_code == 429)
            raise error
        return response

    async def get(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        async def once() -> Any:
            return _json(await self._send("GET", path, params=params))

        return await _with_retries(self.retry, True, once)

    async def get_bytes(self, path: str) -> bytes:
        """A GET whose answer is not JSON (a stored document): its body as it came."""

        async def once() -> bytes:
            return (await self._send("GET", path, headers={"Accept": "*/*"})).content

        return await _with_retries(self.retry, True, once)

    async def post(
        self,
        path: str,
        *,
        json: Any = None,
        data: Mapping[str, str] | None = None,
        files: Mapping[str, tuple[str, bytes, str]] | None = None,
        idempotency_key: str | None = None,
        idempotent: bool = False,
    ) -> Any:
        """A POST (JSON, or multipart with `data` and `files`). Retried like a GET only when
        `idempotent`: the service answers a repeat with the first answer."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key is not None else None

        async def once() -> Any:
            response = await self._send(
                "POST", path, headers=headers, json=json, data=data, files=files
            )
            return _json(response)

        return await _with_retries(self.retry, idempotent, once)

    async def rpc(self, chain_id: int, method: str, params: list[Any]) -> Any:
        """One JSON-RPC call to the service's endpoint for `chain_id`."""

        async def once() -> Any:
            body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
            response = await self._send("POST", f"/rpc/{chain_id}", json=body)
            answer = _json(response)
            error = answer.get("error") if isinstance(answer, Mapping) else None
            if isinstance(error, Mapping) and error.get("code") == LIMIT_EXCEEDED:
                refused = rpc_error(error, method)
                refused.retry_after = _seconds(response.headers.get("Retry-After"))
                raise _Retryable(refused, unrun=True)
            return _result(answer, method)

        return await _with_retries(self.retry, method in self.retry.methods, once)


class NodeRpc:
    """The caller's own JSON-RPC endpoint for the chain (reads: chain id, code, eth_call)."""

    def __init__(self, http: httpx.AsyncClient, url: str, retry: RetryPolicy) -> None:
        self.http = http
        self.url = url
        self.retry = retry
        self._ids = itertools.count(1)

    async def request(self, method: str, params: list[Any]) -> Any:
        async def once() -> Any:
            body = {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}
            try:
                response = await self.http.post(self.url, json=body)
            except httpx.TransportError as exc:
                raise _Retryable(self._unreachable(str(exc))) from exc
            if response.status_code in self.retry.statuses:
                raise _Retryable(self._unreachable(f"HTTP {response.status_code}"))
            if response.status_code >= 400:
                raise self._unreachable(f"HTTP {response.status_code}: {response.text[:200]}")
            return _result(_json(response), method)

        return await _with_retries(self.retry, method in self.retry.methods, once)

    def _unreachable(self, why: str) -> NetworkConnectionError:
        return NetworkConnectionError(
            f"the RPC endpoint {self.url} did not answer: {why}",
            code="network_connection_problem",
            title="Network connection problem",
            problem={
                "checks": [{"check": "the RPC endpoint is reachable and responds", "passed": False}]
            },
        )

    async def chain_id(self) -> int:
        return quantity(await self.request("eth_chainId", []), "eth_chainId")

    async def call(self, to: str, data: bytes) -> bytes:
        return hex_bytes(
            await self.request("eth_call", [{"to": to, "data": to_hex(data)}, "latest"])
        )

    async def get_code(self, address: str) -> bytes:
        return hex_bytes(await self.request("eth_getCode", [address, "latest"]))

    async def get_transaction_receipt(self, tx_hash: str) -> Mapping[str, Any] | None:
        receipt = await self.request("eth_getTransactionReceipt", [tx_hash])
        return receipt if isinstance(receipt, Mapping) else None


def _seconds(header: str | None) -> float | None:
    try:
        return float(header) if header is not None else None
    except ValueError:
        return None


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        if response.status_code >= 400:
            return None
        raise ApiError(
            f"the answer is not JSON: {response.text[:200]!r}", status=response.status_code
        ) from None


def _result(answer: Any, method: str) -> Any:
    if not isinstance(answer, Mapping):
        raise EntrywayError(f"{method}: malformed JSON-RPC answer {answer!r:.200}")
    if answer.get("error") is not None:
        raise rpc_error(answer["error"], method)
    return answer.get("result")
