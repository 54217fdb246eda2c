"""The standalone bundler: JSON-RPC over HTTP at POST /rpc (and POST /), with the batch limits
of `rpc_batch`; it has no API keys, so no rate limit. The HTTP edge in front of it (request
ids, security headers, body size and JSON depth limits) is the service's, installed by the
composition root (`service.bundler_app`) through `edge`."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from entryway.bundler.rpc_batch import batch_refusal, run_batch
from entryway.bundler.rpc_methods import BundlerRpc

Edge = Callable[[Starlette], None]  # adds the HTTP edge's middleware to the app


class BatchLimits(Protocol):
    @property
    def max_rpc_batch(self) -> int: ...

    @property
    def max_rpc_batch_heavy(self) -> int: ...


@dataclass(frozen=True, slots=True)
class DefaultBatchLimits:
    max_rpc_batch: int = 100
    max_rpc_batch_heavy: int = 10


def _json(body: Any) -> Response:
    return Response(orjson.dumps(body), media_type="application/json")


async def handle_rpc(rpc: BundlerRpc, request: Request, limits: BatchLimits) -> Response:
    try:
        payload = orjson.loads(await request.body())
    except orjson.JSONDecodeError:
        return _json(
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}}
        )
    if isinstance(payload, list):
        refusal = batch_refusal(payload, limits.max_rpc_batch)
        if refusal is not None:
            return _json(refusal)
        return _json(await run_batch(payload, rpc.dispatch, max_heavy=limits.max_rpc_batch_heavy))
    response = await rpc.dispatch(payload)
    return _json(response) if response is not None else Response(status_code=204)


def create_bundler_app(
    rpc: BundlerRpc,
    lifespan: Any = None,
    limits: BatchLimits | None = None,
    *,
    edge: Edge | None = None,
) -> Starlette:
    chosen: BatchLimits = limits or DefaultBatchLimits()

    async def endpoint(request: Request) -> Response:
        return await handle_rpc(rpc, request, chosen)

    async def health(request: Request) -> Response:
        return _json({"status": "ok", "mempool": len(rpc.bundler.mempool)})

    app = Starlette(
        routes=[
            Route("/rpc", endpoint, methods=["POST"]),
            Route("/", endpoint, methods=["POST"]),
            Route("/healthz", health, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
    if edge is not None:
        edge(app)
    return app


@asynccontextmanager
async def no_lifespan(app: Starlette) -> AsyncIterator[None]:
    yield
