"""The service's edge, in-process on SQLite and PostgreSQL: body size and JSON limits on REST
and JSON-RPC, batch limits and per-call rate limiting on /rpc, strict chain ids, request ids
and security headers. The chain behind /rpc is a stand-in that records the calls it gets."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any, cast

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.bundler.rpc_batch import LIMIT_EXCEEDED
from entryway.bundler.rpc_methods import BundlerRpc
from entryway.chain.rpc import EthClient
from entryway.deploy.deployer import Deployment
from entryway.domain.plans import PlanName
from entryway.service.ratelimit import RateLimiter, parse_limits
from entryway.service.services import ChainRuntime
from tests.integration.api.conftest import Api, make_api
from tests.integration.api.test_rate_limits import clear_of_minute_edge

PROBLEM = "application/problem+json"
CHAIN = 80002
MIB = 1024 * 1024


class RecordingBundler:
    def __init__(self) -> None:
        self.calls: list[Any] = []
        self.methods: dict[str, Any] = {"eth_chainId": self.dispatch}  # what usage names

    async def dispatch(self, request: Any) -> dict[str, Any] | None:
        self.calls.append(request)
        if isinstance(request, dict) and "id" not in request:
            return None
        return {"jsonrpc": "2.0", "id": request.get("id"), "result": "0x13882"}


class AnsweringNode:
    rpc = SimpleNamespace(unreachable=False, timeout=5.0)  # never down, as the gate sees it

    async def chain_id(self, *, deadline_s: float | None = None) -> int:
        return CHAIN


def serve_chain(api: Api) -> RecordingBundler:
    bundler = RecordingBundler()
    api.services.chains[CHAIN] = ChainRuntime(
        CHAIN,
        "",
        cast(Deployment, None),
        cast(BundlerRpc, bundler),
        cast(EthClient, AnsweringNode()),
    )
    return bundler


def call(i: int, method: str = "eth_chainId") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": i, "method": method, "params": []}


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def hash_body(metadata: str) -> bytes:
    return (
        '{"chainId":80002,"documentHash":"0x' + "ab" * 32 + '","metadata":' + metadata + "}"
    ).encode()


# ------------------------------------------------------------------ JSON: depth and numbers

ATTACK = """
import asyncio, httpx
from entryway.service.app import create_app  # imports py_ecc: recursion limit 100,000
from entryway.service.services import Services

async def main():
    transport = httpx.ASGITransport(app=create_app(Services()), raise_app_exceptions=False)
    deep = "[" * 100_000 + "]" * 100_000
    body = ('{"documentHash":"0x' + "ab" * 32 + '","metadata":' + deep + "}").encode()
    async with httpx.AsyncClient(transport=transport, base_url="http://entryway.test") as client:
        for path in ("/v1/notarizations", "/rpc/80002"):
            r = await client.post(path, content=body, headers={"Content-Type": "application/json"})
            print(r.status_code, r.text)

asyncio.run(main())
"""


def test_an_anonymous_body_nested_100000_levels_is_refused_and_the_process_lives() -> None:
    # In a child process: before the edge existed this attack killed the interpreter with a
    # segmentation fault, which would take the test runner down with it.
    done = subprocess.run(
        [sys.executable, "-c", ATTACK], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    rest, rpc = done.stdout.splitlines()
    status, body = rest.split(" ", 1)
    assert (status, json.loads(body)["code"]) == ("400", "json_too_deep")
    status, body = rpc.split(" ", 1)
    assert (status, json.loads(body)["error"]["code"]) == ("200", -32600)


async def test_json_nested_past_the_limit_is_refused_on_rest_and_rpc(api: Api) -> None:
    bundler = serve_chain(api)
    r = await api.client.post(
        "/v1/notarizations", headers=api.auth(), content=hash_body(nested(65))
    )
    assert (r.status_code, r.headers["content-type"]) == (400, PROBLEM)
    assert r.json()["code"] == "json_too_deep" and "64" in r.json()["detail"]
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": json.loads(nested(70))}
    r = await api.client.post(f"/rpc/{CHAIN}", headers=api.auth(), json=rpc)
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert r.json() == {"jsonrpc": "2.0", "id": None, "error": r.json()["error"]}
    assert r.json()["error"]["code"] == -32600
    assert bundler.calls == []
    # At the limit, 64 levels (the envelope and 63 arrays), the call goes through.
    at_limit = {**call(2), "params": json.loads(nested(63))}
    r = await api.client.post(f"/rpc/{CHAIN}", headers=api.auth(), json=at_limit)
    assert r.json()["result"] == "0x13882"
    assert [c["id"] for c in bundler.calls] == [2]


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"])
async def test_numbers_json_does_not_have_are_refused_not_stored_as_null(
    api: Api, number: str
) -> None:
    bundler = serve_chain(api)
    body = hash_body('{"amount":' + number + "}")
    for headers in (api.auth(), {}):  # before authentication, too
        r = await api.client.post(
            "/v1/notarizations",
            headers={**headers, "Content-Type": "application/json"},
            content=body,
        )
        assert (r.status_code, r.headers["content-type"]) == (400, PROBLEM)
        assert r.json()["code"] == "invalid_json"
    rpc = '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[' + number + "]}"
    r = await api.client.post(f"/rpc/{CHAIN}", headers=api.auth(), content=rpc.encode())
    assert (r.status_code, r.json()["error"]["code"]) == (200, -32700)
    assert bundler.calls == []


# ------------------------------------------------------------------ body size


async def test_a_body_past_the_limit_is_refused_413_before_it_is_read_whole(api: Api) -> None:
    bundler = serve_chain(api)
    pulled = 0

    async def chunks() -> AsyncIterator[bytes]:
        nonlocal pulled
        yield b'{"metadata":"'
        for _ in range(128):  # 8 MiB, without a Content-Length
            pulled += 1
            yield b"a" * (64 * 1024)
        yield b'"}'

    headers = {**api.auth(), "Content-Type": "application/json"}
    r = await api.client.post("/v1/notarizations", headers=headers, content=chunks())
    assert (r.status_code, r.headers["content-type"]) == (413, PROBLEM)
    assert r.json()["code"] == "payload_too_large" and r.json()["limit"] == MIB
    assert pulled <= 17, "the body was read past the limit"
    # The rest of the body is not waited for: the connection closes after the answer.
    assert r.headers["Connection"] == "close"

    # With a Content-Length, nothing is read at all.
    pulled = 0
    r = await api.client.post(
        "/v1/notarizations", headers=headers, content=b"[" + b"1," * MIB + b"1]"
    )
    assert (r.status_code, r.json()["code"]) == (413, "payload_too_large")

    pulled = 0
    r = await api.client.post(f"/rpc/{CHAIN}", headers=headers, content=chunks())
    assert r.status_code == 413 and r.headers["content-type"] == "application/json"
    assert r.json()["error"]["code"] == -32600 and pulled <= 17
    assert bundler.calls == []

    # A document upload is a form: held to the upload bound (and the route's own), not 1 MiB.
    files = {"file": ("doc.bin", b"\0" * (2 * MIB), "application/octet-stream")}
    r = await api.client.post(
        "/v1/notarizations/document", headers=api.auth(), files=files, data={"chainId": "80002"}
    )
    assert r.status_code != 413, r.text


# ------------------------------------------------------------------ JSON-RPC batches


async def test_a_batch_past_the_limit_or_empty_is_one_invalid_request_error(api: Api) -> None:
    bundler = serve_chain(api)
    r = await api.client.post(
        f"/rpc/{CHAIN}", headers=api.auth(), json=[call(i) for i in range(101)]
    )
    assert r.status_code == 200
    answer = r.json()
    assert isinstance(answer, dict) and answer["error"]["code"] == -32600
    assert "at most 100" in answer["error"]["message"]
    r = await api.client.post(f"/rpc/{CHAIN}", headers=api.auth(), json=[])
    assert r.json()["error"]["code"] == -32600 and "empty" in r.json()["error"]["message"]
    assert bundler.calls == []
    r = await api.client.post(
        f"/rpc/{CHAIN}", headers=api.auth(), json=[call(i) for i in range(100)]
    )
    assert [a["id"] for a in r.json()] == list(range(100))
    assert "Connection" not in r.headers  # a body read whole keeps the connection


async def test_heavy_calls_in_a_batch_are_capped(api: Api) -> None:
    bundler = serve_chain(api)
    batch = [call(i, "eth_estimateUserOperationGas") for i in range(12)] + [call(12)]
    r = await api.client.post(f"/rpc/{CHAIN}", headers=api.auth(), json=batch)
    codes = [a.get("error", {}).get("code") for a in r.json()]
    assert codes == [None] * 10 + [LIMIT_EXCEEDED] * 2 + [None]
    assert len(bundler.calls) == 11


@pytest.fixture
async def limited(engine: AsyncEngine) -> AsyncIterator[Api]:
    limits = {**parse_limits(""), PlanName.FREE: "3/minute"}
    await clear_of_minute_edge()
    async for api in make_api(engine, RateLimiter(limits)):
        yield api


async def test_every_call_of_a_batch_counts_toward_the_rate_limit(limited: Api) -> None:
    bundler = serve_chain(limited)
    r = await limited.client.post(
        f"/rpc/{CHAIN}", headers=limited.auth(), json=[call(i) for i in range(5)]
    )
    assert r.status_code == 200  # the calls that ran must reach the client
    answers = r.json()
    assert [a.get("result") for a in answers[:3]] == ["0x13882"] * 3
    assert [a["error"]["code"] for a in answers[3:]] == [LIMIT_EXCEEDED] * 2
    assert [a["id"] for a in answers] == [0, 1, 2, 3, 4]
    assert len(bundler.calls) == 3
    assert r.headers["RateLimit-Remaining"] == "0"
    r = await limited.client.post(f"/rpc/{CHAIN}", headers=limited.auth(), json=call(9))
    assert (r.status_code, r.json()["code"]) == (429, "rate_limited")


# ------------------------------------------------------------------ chain ids


@pytest.mark.parametrize("chain", ["80002.0", "+80002", "080002", "80002 ", "-80002"])
async def test_a_chain_id_is_plain_decimal(api: Api, chain: str) -> None:
    bundler = serve_chain(api)
    r = await api.client.post(f"/rpc/{chain}", headers=api.auth(), json=call(1))
    assert (r.status_code, r.headers["content-type"]) == (422, PROBLEM), r.text
    assert r.json()["code"] == "validation_error"
    r = await api.client.get("/get-sdk-defaults", params={"chainId": chain}, headers=api.auth())
    assert (r.status_code, r.json()["code"]) == (422, "validation_error")
    assert bundler.calls == []


# ------------------------------------------------------------------ request ids and headers

SECURITY = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Resource-Policy": "same-origin",
}


async def test_every_answer_carries_the_security_headers(api: Api) -> None:
    answers = {
        "ok": await api.client.get("/v1/project", headers=api.auth()),
        "not found": await api.client.get("/v1/nowhere", headers=api.auth()),
        "invalid": await api.client.post("/v1/keys", headers=api.auth(), json={"chains": []}),
        "unauthenticated": await api.client.get("/v1/project"),
        "refused at the edge": await api.client.post("/v1/keys", content=b"[NaN]"),
        "openapi": await api.client.get("/openapi.json"),
        "docs": await api.client.get("/docs"),
    }
    statuses = {name: r.status_code for name, r in answers.items()}
    assert statuses == {
        "ok": 200, "not found": 404, "invalid": 422, "unauthenticated": 401,
        "refused at the edge": 400, "openapi": 200, "docs": 200,
    }  # fmt: skip
    for name, r in answers.items():
        assert {h: r.headers.get(h) for h in SECURITY} == SECURITY, name
        assert r.headers["Entryway-API-Version"] == "v1", name
        policy = r.headers["Content-Security-Policy"]
        assert "frame-ancestors 'none'" in policy, name
        if name != "docs":
            assert policy.startswith("default-src 'none';") and "script-src" not in policy, name
    # Swagger UI's page may load its scripts and styles from the CDN, and nothing else.
    docs = answers["docs"].headers["Content-Security-Policy"]
    assert "script-src 'unsafe-inline' https://cdn.jsdelivr.net;" in docs
    assert "connect-src 'self'" in docs and "default-src 'none'" in docs
    assert "cdn.jsdelivr.net" in answers["docs"].text


async def test_keys_and_admin_answers_are_never_cached(api: Api) -> None:
    for r in (
        await api.client.get("/v1/keys", headers=api.auth()),
        await api.client.post("/v1/keys", headers=api.auth(), json={"chains": [80002]}),
        await api.client.get("/v1/admin/paymaster"),
        await api.client.get("/v1/keys/none", headers=api.auth()),
    ):
        assert r.headers["Cache-Control"] == "no-store", (r.request.url, r.status_code)
    r = await api.client.get("/v1/project", headers=api.auth())
    assert "no-store" not in r.headers.get("Cache-Control", "")


async def test_a_request_id_is_echoed_when_plain_and_made_otherwise(api: Api) -> None:
    r = await api.client.get("/v1/nowhere", headers={**api.auth(), "X-Request-Id": "trace-42.a:b"})
    assert r.headers["X-Request-Id"] == "trace-42.a:b"
    assert r.json()["requestId"] == "trace-42.a:b"
    for unsafe in ("x" * 65, "a b", "<script>", ""):
        r = await api.client.get("/v1/nowhere", headers={"X-Request-Id": unsafe})
        made = r.headers["X-Request-Id"]
        assert made != unsafe and len(made) == 32 and made.isalnum()
        assert r.json()["requestId"] == made
    first = await api.client.get("/healthz")
    second = await api.client.get("/healthz")
    assert first.headers["X-Request-Id"] != second.headers["X-Request-Id"]
