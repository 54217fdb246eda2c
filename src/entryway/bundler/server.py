"""The standalone bundler: JSON-RPC over HTTP at POST /rpc (and POST /)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from entryway.bundler.rpc_methods import BundlerRpc


def _json(body: Any) -> Response:
    return Response(orjson.dumps(body), media_type="application/json")


async def handle_rpc(rpc: BundlerRpc, request: Request) -> Response:
    try:
        payload = orjson.loads(await request.body())
    except orjson.JSONDecodeError:
        return _json(
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}}
        )
    if isinstance(payload, list):
        if not payload:
            return _json(
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "empty batch"}}
            )
        responses = [r for r in [await rpc.dispatch(item) for item in payload] if r is not None]
        return _json(responses)
    response = await rpc.dispatch(payload)
    return _json(response) if response is not None else Response(status_code=204)


def create_bundler_app(rpc: BundlerRpc, lifespan: Any = None) -> Starlette:
    async def endpoint(request: Request) -> Response:
        return await handle_rpc(rpc, request)

    async def health(request: Request) -> Response:
        return _json({"status": "ok", "mempool": len(rpc.bundler.mempool)})

    return Starlette(
        routes=[
            Route("/rpc", endpoint, methods=["POST"]),
            Route("/", endpoint, methods=["POST"]),
            Route("/healthz", health, methods=["GET"]),
        ],
        lifespan=lifespan,
    )


@asynccontextmanager
async def no_lifespan(app: Starlette) -> AsyncIterator[None]:
    yield
