"""Hostile requests against a real `entryway up`: deep nesting, huge numbers, huge batches,
odd encodings and malformed envelopes, on every REST operation that takes a JSON body and on
the JSON-RPC endpoint, with and without a key. None may get a 5xx, and the process must be
alive and serving afterwards.

Hypothesis draws the bodies; the explicit attacks (a body nested 100,000 levels, a 30 MB
body, a 10,000-call batch) are examples every run tries."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from entryway.devnet.anvil import free_port
from tests.running import start_unthrottled, stop


@dataclass
class Target:
    url: str
    key: str
    proc: Any
    bodies: list[str]  # "METHOD path" of every operation that takes a JSON body
    fields: list[str]  # every property name the OpenAPI schemas declare
    http: httpx.Client | None = None

    def client(self) -> httpx.Client:
        if self.http is None:
            self.http = httpx.Client(base_url=self.url, timeout=60)
        return self.http

    def alive(self) -> bool:
        return self.proc.returncode is None


@pytest.fixture(scope="module")
async def target(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Target]:
    proc, url, key = await start_unthrottled(
        tmp_path_factory.mktemp("hostile"), free_port(), "hostile"
    )
    async with httpx.AsyncClient(base_url=url) as http:
        doc = (await http.get("/openapi.json")).json()
    bodies = [
        f"{method.upper()} {path}"
        for path, ops in doc["paths"].items()
        for method, op in ops.items()
        if "application/json" in op.get("requestBody", {}).get("content", {})
        and "/admin/" not in path
    ]
    fields = sorted(
        {name for s in doc["components"]["schemas"].values() for name in s.get("properties", {})}
    )
    t = Target(url, key, proc, bodies, fields)
    try:
        yield t
    finally:
        if t.http is not None:
            t.http.close()
        await stop(proc)


def _concrete(path: str) -> str:
    """A path with its parameters filled: chain ids a real chain, the rest a plausible id."""
    out = []
    for part in path.split("/"):
        if part == "{chain_id}" or part == "{chainId}":
            out.append("80002")
        elif part.startswith("{"):
            out.append("00000000-0000-0000-0000-000000000000")
        else:
            out.append(part)
    return "/".join(out)


# ------------------------------------------------------------------ what hostile bodies are

NUMBER_TOKENS = [
    "1e400", "-1e400", "NaN", "Infinity", "-Infinity", "1" + "0" * 5000, "-0", "1e-400",
    "0x10", "18446744073709551616", str(2**128 - 1), str(2**256), "-" + str(2**63),
    "1.0", "80002.0", "true", "01", "+1", ".5",
]  # fmt: skip
ODD_STRINGS = [
    "\x00", "a\x00b", "\ud800", "\udfff", "\u202e", "\ufeff", "é" * 3, "%00", "../../etc/passwd",
    "<script>alert(1)</script>", "http://127.0.0.1:22/", "http://169.254.169.254/latest/",
    "0x" + "f" * 40, "0x" + "f" * 64, "0x", "x" * 70_000,
]  # fmt: skip


def _deep(depth: int, opener: str) -> str:
    if opener == "[":
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**300), max_value=2**300),
    st.floats(allow_nan=False, allow_infinity=False), st.sampled_from(ODD_STRINGS),
    st.text(max_size=40),
)  # fmt: skip
json_value = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def hostile_text(draw: st.DrawFn, fields: list[str]) -> str:
    """JSON-looking text: an object of real field names with odd values, where some values
    are raw number tokens or deep nesting spliced in as text."""
    names = draw(st.lists(st.sampled_from(fields), min_size=0, max_size=6, unique=True))
    parts = []
    for name in names:
        kind = draw(st.sampled_from(["value", "token", "deep"]))
        if kind == "token":
            raw = draw(st.sampled_from(NUMBER_TOKENS))
        elif kind == "deep":
            raw = _deep(draw(st.sampled_from([64, 1_000, 20_000])), draw(st.sampled_from("[{")))
        else:
            raw = json.dumps(draw(json_value))
        parts.append(f"{json.dumps(name)}:{raw}")
    return "{" + ",".join(parts) + "}"


@st.composite
def hostile_body(draw: st.DrawFn, fields: list[str]) -> bytes:
    text = draw(
        st.one_of(
            hostile_text(fields),
            st.builds(json.dumps, json_value),
            st.builds(_deep, st.sampled_from([10, 3_000, 100_000]), st.sampled_from("[{")),
            st.sampled_from(["", "{", "[", "null", '{"a":1}{', "\x00", '"unterminated']),
        )
    )
    encoding = draw(st.sampled_from(["utf-8", "utf-8", "utf-16", "utf-32", "latin-1", "bom"]))
    if encoding == "bom":
        return b"\xef\xbb\xbf" + text.encode("utf-8", "surrogatepass")
    if encoding == "latin-1":
        return text.encode("utf-8", "surrogatepass").replace(b"a", b"\xe9\xff", 1)
    return text.encode(encoding, "surrogatepass")


RPC_METHODS = [
    "eth_sendUserOperation", "eth_estimateUserOperationGas", "eth_getUserOperationReceipt",
    "eth_getUserOperationByHash", "eth_supportedEntryPoints", "eth_chainId",
    "pm_getPaymasterStubData", "pm_getPaymasterData", "debug_bundler_dumpMempool",
    "nonexistent_method",
]  # fmt: skip


@st.composite
def rpc_envelope(draw: st.DrawFn) -> Any:
    call: dict[str, Any] = {}
    if draw(st.booleans()):
        call["jsonrpc"] = draw(st.sampled_from(["2.0", "1.0", 2, None]))
    if draw(st.booleans()):
        call["id"] = draw(json_value)
    call["method"] = draw(st.one_of(st.sampled_from(RPC_METHODS), json_value))
    if draw(st.booleans()):
        odd_hex = st.sampled_from(["0x" + "f" * 64, "0x", hex(2**128 - 1)])
        names = draw(st.lists(st.sampled_from(_OP_FIELDS), max_size=6, unique=True))
        op = {f: draw(st.one_of(odd_hex, json_value)) for f in names}
        call["params"] = draw(st.sampled_from([[op], [op, "0x" + "00" * 20], op, [op, {}, {}]]))
    return call


_OP_FIELDS = [
    "sender", "nonce", "factory", "factoryData", "callData", "callGasLimit",
    "verificationGasLimit", "preVerificationGas", "maxFeePerGas", "maxPriorityFeePerGas",
    "paymaster", "paymasterVerificationGasLimit", "paymasterPostOpGasLimit", "paymasterData",
    "signature", "eip7702Auth",
]  # fmt: skip


def _batch(n: int) -> str:
    return json.dumps([{"jsonrpc": "2.0", "id": i, "method": "eth_chainId"} for i in range(n)])


def _deep_params(depth: int) -> str:
    return '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":' + _deep(depth, "[") + "}"


rpc_body = st.one_of(
    rpc_envelope().map(json.dumps),
    st.lists(rpc_envelope(), max_size=30).map(json.dumps),
    st.builds(_batch, st.sampled_from([0, 101, 10_000])),
    st.builds(_deep_params, st.sampled_from([100, 5_000, 100_000])),
).map(lambda s: s.encode("utf-8", "surrogatepass"))


def _send(t: Target, method: str, path: str, body: bytes, key: str | None) -> httpx.Response:
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return t.client().request(method, path, content=body, headers=headers)


def _check(t: Target, response: httpx.Response) -> None:
    assert response.status_code < 500, (response.status_code, response.text[:500])
    assert t.alive(), "the service died"


FUZZ = settings(max_examples=150, suppress_health_check=list(HealthCheck), derandomize=True)


@FUZZ
@given(data=st.data())
def test_rest_bodies_get_no_server_error(target: Target, data: st.DataObject) -> None:
    operation = data.draw(st.sampled_from(target.bodies))
    method, path = operation.split(" ", 1)
    body = data.draw(hostile_body(target.fields))
    key = data.draw(st.sampled_from([target.key, None]))
    _check(target, _send(target, method, _concrete(path), body, key))


@FUZZ
@given(body=rpc_body, key=st.sampled_from([True, False]), chain=st.sampled_from(["80002", "84532"]))
@example(body=_batch(10_000).encode(), key=True, chain="80002")
def test_json_rpc_envelopes_get_no_server_error(
    target: Target, body: bytes, key: bool, chain: str
) -> None:
    response = _send(target, "POST", f"/rpc/{chain}", body, target.key if key else None)
    _check(target, response)
    if key and response.status_code == 200 and response.content:
        answer = response.json()
        for one in answer if isinstance(answer, list) else [answer]:
            assert "result" in one or "error" in one, one


def test_a_body_nested_100000_levels_leaves_the_service_serving(target: Target) -> None:
    body = (
        '{"documentHash":"0x' + "ab" * 32 + '","metadata":' + _deep(100_000, "[") + "}"
    ).encode()
    response = _send(target, "POST", "/v1/notarizations", body, None)
    _check(target, response)
    response = _send(target, "POST", "/v1/notarizations", body, target.key)
    _check(target, response)
    assert response.status_code in (400, 413, 422), response.text[:300]


def test_a_30_mb_body_is_refused_and_the_service_serves_on(target: Target) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"metadata":"'
        for _ in range(30):
            yield b"a" * 1_000_000
        yield b'"}'

    headers = {"Authorization": f"Bearer {target.key}", "Content-Type": "application/json"}
    for path in ("/v1/notarizations", "/rpc/80002"):
        for content in (chunks(), b"".join(chunks())):  # chunked, then with a Content-Length
            try:
                status = target.client().post(path, content=content, headers=headers).status_code
            except (httpx.WriteError, httpx.RemoteProtocolError, httpx.ReadError):
                status = 413  # refused before the upload ended: the server closed the stream
            assert status == 413, (path, status)
            assert _alive_and_healthy(target)


def test_the_service_is_alive_and_serving_afterwards(target: Target) -> None:
    assert _alive_and_healthy(target)
    auth = {"Authorization": f"Bearer {target.key}"}
    r = target.client().get("/get-sdk-defaults?chainId=80002", headers=auth)
    assert r.status_code == 200, r.text


def _alive_and_healthy(t: Target) -> bool:
    return t.alive() and t.client().get("/healthz").status_code == 200
