"""A fake Entryway service and node for unit tests, over httpx.MockTransport."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from entryway_sdk import Entryway, RetryPolicy

API = "http://api.test"
NODE = "http://node.test/rpc"
DEFAULTS = {
    "chainId": 80002,
    "network": "polygon-amoy",
    "testnet": True,
    "nativeToken": "POL",
    "explorer": "https://amoy.polygonscan.com",
    "entryPoint": "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108",
    "accountFactory": "0x17e2daa961b4c19d0a2655cbf0092aef73398b76",
    "paymaster": "0xD0cF9e6DB79Cb594E04D1c82319cfCDE99B31C85",
    "notary": "0x9D46B2548D80239044E232c32B01844f82F54723",
    "bundlerUrl": f"{API}/rpc/80002",
    "minPriorityFeePerGas": hex(25 * 10**9),
    "somethingNew": 1,
}
FAST = RetryPolicy(attempts=3, backoff=0.0)


def problem(status: int, code: str, **extra: Any) -> httpx.Response:
    body = {"type": f"https://entryway.dev/problems/{code}", "title": code, "status": status}
    body |= {"code": code, "detail": f"detail of {code}", **extra}
    return httpx.Response(status, json=body, headers={"content-type": "application/problem+json"})


def rpc_error(code: int, message: str, data: Any = None) -> httpx.Response:
    error = {"code": code, "message": message} | ({"data": data} if data is not None else {})
    return httpx.Response(200, json={"jsonrpc": "2.0", "id": 1, "error": error})


@dataclass
class Fake:
    """A node answering one chain id and a service answering by path (or by JSON-RPC
    method); every request is recorded."""

    chain_id: int = 80002
    routes: dict[str, Callable[[httpx.Request], httpx.Response]] = field(default_factory=dict)
    seen: list[str] = field(default_factory=list)

    def handle(self, request: httpx.Request) -> httpx.Response:
        if str(request.url) == NODE:
            self.seen.append("node")
            return httpx.Response(
                200, json={"jsonrpc": "2.0", "id": 1, "result": hex(self.chain_id)}
            )
        key = request.url.path
        if key.startswith("/rpc/"):
            key = json.loads(request.content)["method"]
        self.seen.append(key)
        assert request.headers["authorization"] == "Bearer ew_test_key"
        route = self.routes.get(key)
        if route is not None:
            return route(request)
        if key == "/get-sdk-defaults":
            return httpx.Response(200, json=DEFAULTS)
        return problem(404, "not_found")


async def init(http: httpx.AsyncClient, retry: RetryPolicy = FAST) -> Entryway:
    return await Entryway.init(
        api_key="ew_test_key", rpc_url=NODE, chain_id=80002, base_url=API, http=http, retry=retry
    )
