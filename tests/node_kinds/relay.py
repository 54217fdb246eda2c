"""A JSON-RPC relay on 127.0.0.1 in front of a real node (anvil), behaving as another kind
of node would: a hosted provider, a public endpoint, geth, or anvil itself (`NodeKind`).

No hosted endpoint or geth is reachable from the test machines, and a client written
against anvil alone has never met a refusal: the relay answers each kind's refusals the
way those nodes do (`tests.node_kinds.kinds`) and forwards everything else to the real
node, so the client's answer to a refusal is tested against real chain state.

It counts every call it receives, by method, and keeps the raw transactions it forwarded,
so a test can say that a write reached the node exactly once.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections import Counter
from pathlib import Path
from typing import Any, Self

import aiohttp
import orjson
from aiohttp import web

from entryway.devnet.anvil import free_port
from tests.node_kinds.kinds import (
    ERC7562_TRACER,
    RATE_LIMITED,
    SERVER_ERROR,
    NodeKind,
    RelayLimits,
    batch_refusal,
    error,
    method_refusal,
    params_refusal,
    range_refusal,
    results_refusal,
    trace_options,
)

ERC7562_TRACER_JS = Path(__file__).with_name("erc7562_tracer.js")
WRITES = frozenset({"eth_sendRawTransaction", "eth_sendTransaction"})
_TAGS_AT_HEAD = frozenset({"latest", "pending", "safe", "finalized"})


class TokenBucket:
    """`burst` tokens, refilled at `per_s` a second; read from the relay's live limits."""

    def __init__(self, limits: RelayLimits) -> None:
        self.limits = limits
        self.tokens = float(limits.burst)
        self.at = time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        refill = (now - self.at) * self.limits.per_s
        self.tokens = min(float(self.limits.burst), self.tokens + refill)
        self.at = now
        if self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        return True


class NodeRelay:
    """The relay for one upstream node. `async with NodeRelay(url, "hosted") as relay:` serves
    on `relay.url` until the block ends. `relay.limits` may be changed at any time (a test
    tightens them); the counters are read and reset (`reset_counts`) the same way."""

    def __init__(
        self,
        upstream: str,
        kind: NodeKind | str = NodeKind.ANVIL,
        limits: RelayLimits | None = None,
        *,
        erc7562_tracer: Path = ERC7562_TRACER_JS,
    ) -> None:
        self.upstream = upstream
        self.kind = NodeKind(kind)
        self.limits = limits or RelayLimits()
        self.erc7562_tracer = erc7562_tracer
        self.port = free_port()
        self.bucket = TokenBucket(self.limits)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.reset_counts()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def reset_counts(self) -> None:
        self.calls: Counter[str] = Counter()  # every call received, batched ones each
        self.forwarded: Counter[str] = Counter()  # passed on to the node
        self.refused: Counter[str] = Counter()  # answered with the relay's own error
        self.throttled: Counter[str] = Counter()  # in a request answered HTTP 429
        self.writes: list[str] = []  # raw transactions forwarded, in order
        self.batch_sizes: list[int] = []  # every batch received

    def throttle(self, *, burst: int, per_s: float, retry_after_s: int = 1) -> None:
        """A tight burst limit from now on, the bucket starting full."""
        self.limits.burst, self.limits.per_s = burst, per_s
        self.limits.retry_after_s = retry_after_s
        self.bucket = TokenBucket(self.limits)

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120))

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _handle(self, request: web.Request) -> web.Response:
        try:
            payload = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return _json({"jsonrpc": "2.0", "id": None, "error": error(-32700, "parse error")})
        calls = payload if isinstance(payload, list) else [payload]
        methods = [str(c.get("method")) if isinstance(c, dict) else "?" for c in calls]
        self.calls.update(methods)
        if isinstance(payload, list):
            self.batch_sizes.append(len(payload))
        if self.kind.capped and not self._admitted():
            self.throttled.update(methods)
            body = {"jsonrpc": "2.0", "id": None, "error": RATE_LIMITED}
            headers = {"Retry-After": str(self.limits.retry_after_s)}
            return _json(body, status=429, headers=headers)
        if not isinstance(payload, list):
            return _json(await self._one(payload))
        refusal = batch_refusal(len(payload), self.limits) if self.kind.capped else None
        if refusal is not None:
            self.refused.update(methods)
            if self.limits.batch_refusal == "each":
                return _json(
                    [{"jsonrpc": "2.0", "id": c.get("id"), "error": refusal} for c in calls]
                )
            return _json({"jsonrpc": "2.0", "id": None, "error": refusal})
        return _json(await self._many(payload))

    def _admitted(self) -> bool:
        if self.limits.throttle_next > 0:
            self.limits.throttle_next -= 1
            return False
        return self.bucket.take()

    async def _many(self, calls: list[Any]) -> list[Any]:
        """A batch: each call refused or rewritten on its own, the rest forwarded as one
        batch, the answers in the order asked."""
        answers: list[Any] = [None] * len(calls)
        passing: list[tuple[int, dict[str, Any]]] = []
        for i, call in enumerate(calls):
            ready = await self._prepare(call)
            if isinstance(ready, dict) and "error" in ready:
                answers[i] = ready
            else:
                passing.append((i, ready))
        if passing:
            forwarded = await self._forward([c for _, c in passing])
            by_id = {a.get("id"): a for a in forwarded} if isinstance(forwarded, list) else {}
            for i, call in passing:
                answers[i] = self._checked(call, by_id.get(call.get("id")))
        return answers

    async def _one(self, call: Any) -> Any:
        ready = await self._prepare(call)
        if "error" in ready:
            return ready
        return self._checked(ready, await self._forward(ready))

    async def _prepare(self, call: Any) -> dict[str, Any]:
        """The call as it goes to the node, or the relay's error answer to it."""
        if not isinstance(call, dict) or "method" not in call:
            return {"jsonrpc": "2.0", "id": None, "error": error(-32600, "invalid request")}
        method, params = str(call["method"]), list(call.get("params") or [])
        refusal = method_refusal(self.kind, method, self.limits) or params_refusal(
            self.kind, method, params, self.limits
        )
        if refusal is None and self.kind.capped and method == "eth_getLogs":
            refusal = await self._logs_range_refusal(params)
        if refusal is None and self.kind is NodeKind.GETH:
            call, refusal = self._with_native_tracer(call, method, params)
        if refusal is not None:
            self.refused[method] += 1
            return {"jsonrpc": "2.0", "id": call.get("id"), "error": refusal}
        self.forwarded[method] += 1
        if method in WRITES:
            self.writes.append(str(params[0]) if params else "")
        return call

    def _checked(self, call: dict[str, Any], answer: Any) -> Any:
        """The node's answer, unless the provider would have refused it for its size."""
        if not (self.kind.capped and call.get("method") == "eth_getLogs"):
            return answer
        result = answer.get("result") if isinstance(answer, dict) else None
        refusal = results_refusal(len(result), self.limits) if isinstance(result, list) else None
        if refusal is None:
            return answer
        self.refused["eth_getLogs"] += 1
        return {"jsonrpc": "2.0", "id": call.get("id"), "error": refusal}

    async def _logs_range_refusal(self, params: list[Any]) -> dict[str, Any] | None:
        query = params[0] if params and isinstance(params[0], dict) else {}
        if "blockHash" in query:
            return None
        start = await self._block_number(query.get("fromBlock", "latest"))
        end = await self._block_number(query.get("toBlock", "latest"))
        return range_refusal(start, end, self.limits)

    async def _block_number(self, tag: Any) -> int:
        if tag in _TAGS_AT_HEAD:
            head = await self._forward({"jsonrpc": "2.0", "id": 0, "method": "eth_blockNumber"})
            return int(head["result"], 16)
        return 0 if tag == "earliest" else int(str(tag), 16)

    def _with_native_tracer(
        self, call: dict[str, Any], method: str, params: list[Any]
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """geth's native erc7562Tracer, played on anvil by the JavaScript tracer that emits
        its output; the call's tracerConfig kept."""
        options = trace_options(method, params)
        if method not in ("debug_traceCall", "debug_traceTransaction"):
            return call, None
        if options.get("tracer") != ERC7562_TRACER:
            return call, None
        if not self.erc7562_tracer.is_file():
            missing = f"{ERC7562_TRACER} is not available: {self.erc7562_tracer.name} is missing"
            return call, error(SERVER_ERROR, missing)
        rewritten = copy.deepcopy(call)
        at = 2 if method == "debug_traceCall" else 1
        rewritten["params"][at]["tracer"] = self.erc7562_tracer.read_text()
        return rewritten, None

    async def _forward(self, payload: Any) -> Any:
        assert self._session is not None, "the relay is not started"
        body, headers = orjson.dumps(payload), {"content-type": "application/json"}
        async with self._session.post(self.upstream, data=body, headers=headers) as response:
            return orjson.loads(await response.read())


def _json(body: Any, *, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        body=orjson.dumps(body), status=status, headers=headers, content_type="application/json"
    )


async def wait_for(predicate: Any, within_s: float = 5.0) -> None:
    """Until `predicate()` holds (a relay count reached), at most `within_s`."""
    deadline = time.monotonic() + within_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the relay did not see what was awaited")
        await asyncio.sleep(0.01)
