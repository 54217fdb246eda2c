"""The standalone bundler's JSON-RPC endpoint holds batches and bodies to the same limits as
the service: batch length, heavy calls per batch, body size and JSON depth (no API keys, so
no rate limit). The bundler behind it is a stand-in that records what it was asked."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, cast

import httpx
import pytest

from entryway.bundler.rpc_batch import LIMIT_EXCEEDED, batch_refusal, run_batch
from entryway.bundler.rpc_methods import BundlerRpc
from entryway.service.bundler_app import bundler_http_app
from entryway.service.limits import RequestLimits


class RecordingRpc:
    def __init__(self) -> None:
        self.calls: list[Any] = []

    async def dispatch(self, request: Any) -> dict[str, Any] | None:
        self.calls.append(request)
        if isinstance(request, dict) and "id" not in request:
            return None
        return {"jsonrpc": "2.0", "id": request.get("id"), "result": "0x1"}


def call(i: int, method: str = "eth_chainId") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": i, "method": method, "params": []}


@pytest.fixture
async def bundler() -> AsyncIterator[tuple[httpx.AsyncClient, RecordingRpc]]:
    rpc = RecordingRpc()
    limits = RequestLimits(max_body_bytes=64 * 1024, max_rpc_batch=20, max_rpc_batch_heavy=3)
    app = bundler_http_app(cast(BundlerRpc, rpc), limits=limits)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://bundler.test") as client:
        yield client, rpc


async def test_a_batch_longer_than_the_limit_is_refused_whole(
    bundler: tuple[httpx.AsyncClient, RecordingRpc],
) -> None:
    client, rpc = bundler
    r = await client.post("/rpc", json=[call(i) for i in range(21)])
    assert r.status_code == 200
    assert r.json()["error"]["code"] == -32600 and "at most 20" in r.json()["error"]["message"]
    r = await client.post("/", json=[])
    assert r.json()["error"]["code"] == -32600
    assert rpc.calls == []
    r = await client.post("/rpc", json=[call(i) for i in range(20)])
    assert [a["result"] for a in r.json()] == ["0x1"] * 20


async def test_heavy_calls_past_the_cap_are_answered_limit_exceeded(
    bundler: tuple[httpx.AsyncClient, RecordingRpc],
) -> None:
    client, rpc = bundler
    batch = [call(i, "eth_estimateUserOperationGas") for i in range(5)] + [call(5)]
    r = await client.post("/rpc", json=batch)
    answers = r.json()
    assert [a["id"] for a in answers] == [0, 1, 2, 3, 4, 5]  # in order, one per call
    assert [a.get("error", {}).get("code") for a in answers] == [None] * 3 + [
        LIMIT_EXCEEDED
    ] * 2 + [None]
    assert [c["id"] for c in rpc.calls] == [0, 1, 2, 5]


async def test_deep_huge_or_non_json_bodies_get_json_rpc_errors(
    bundler: tuple[httpx.AsyncClient, RecordingRpc],
) -> None:
    client, rpc = bundler
    deep = (
        b'{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":' + b"[" * 100 + b"]" * 100 + b"}"
    )
    r = await client.post("/rpc", content=deep)
    assert (r.status_code, r.json()["error"]["code"]) == (200, -32600)
    r = await client.post(
        "/rpc", content=b'{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[NaN]}'
    )
    assert (r.status_code, r.json()["error"]["code"]) == (200, -32700)
    r = await client.post("/rpc", content=b"[" + b"1," * 40_000 + b"1]")
    assert r.status_code == 413 and r.json()["error"]["code"] == -32600
    assert rpc.calls == []
    assert r.headers["X-Content-Type-Options"] == "nosniff" and r.headers["X-Request-Id"]


async def test_run_batch_answers_calls_past_the_rate_limit_and_skips_notifications() -> None:
    rpc = RecordingRpc()
    notification = {"jsonrpc": "2.0", "method": "eth_chainId"}
    batch = [call(0), call(1), notification, call(3), "junk"]
    answers = await run_batch(
        batch, rpc.dispatch, max_heavy=10, admitted=2, over_rate_limit="slow down"
    )
    assert answers == [
        {"jsonrpc": "2.0", "id": 0, "result": "0x1"},
        {"jsonrpc": "2.0", "id": 1, "result": "0x1"},
        {"jsonrpc": "2.0", "id": 3, "error": {"code": LIMIT_EXCEEDED, "message": "slow down"}},
        {"jsonrpc": "2.0", "id": None, "error": {"code": LIMIT_EXCEEDED, "message": "slow down"}},
    ]
    assert rpc.calls == [call(0), call(1)]
    assert batch_refusal([call(0)], 1) is None
