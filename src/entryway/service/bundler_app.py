"""The standalone bundler's HTTP app (`entryway bundler`): the bundler's JSON-RPC endpoint
behind the same edge as the service (request ids, security headers, body size and JSON depth
limits) and the same batch limits."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette

from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.server import Edge, create_bundler_app
from entryway.bundler.standalone import StandaloneSettings, build_bundler
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.service.body_guard import BodyGuard
from entryway.service.edge import EdgeMiddleware
from entryway.service.limits import RequestLimits


def service_edge(limits: RequestLimits) -> Edge:
    def install(app: Starlette) -> None:
        # Every body here is JSON-RPC: refusals are JSON-RPC errors whatever the path.
        app.add_middleware(BodyGuard, limits=limits, is_json_rpc=lambda path: True)
        app.add_middleware(EdgeMiddleware)

    return install


def bundler_http_app(
    rpc: BundlerRpc, lifespan: Any = None, limits: RequestLimits | None = None
) -> Starlette:
    """`rpc` over HTTP behind the service's edge."""
    chosen = limits or RequestLimits()
    return create_bundler_app(rpc, lifespan, chosen, edge=service_edge(chosen))


def create_standalone_app(
    settings: StandaloneSettings, limits: RequestLimits | None = None
) -> Starlette:
    holder: dict[str, BundlerRpc] = {}

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with JsonRpcClient(settings.rpc_url) as rpc:
            built = await build_bundler(EthClient(rpc), settings)
            holder["rpc"] = built
            await built.start()
            try:
                yield
            finally:
                await built.stop()

    class _Lazy(BundlerRpc):
        """Routes to the bundler the lifespan builds (nothing connects at import time)."""

        def __init__(self) -> None:
            pass

        def __getattr__(self, name: str) -> object:
            return getattr(holder["rpc"], name)

    return bundler_http_app(_Lazy(), lifespan=lifespan, limits=limits)
