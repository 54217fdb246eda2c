"""A node further away: a relay in front of the devnet's JSON-RPC endpoint that holds each
request for a fixed time before passing it on (`bench.bundler --node-latency-ms`). A hosted
node answers a request in tens of milliseconds where anvil on the same machine answers in
one: what a bundler does while it waits for the node shows only with the wait put back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web

from bench.node_relay import node_relay


@asynccontextmanager
async def slow_node(rpc_url: str, latency_ms: float) -> AsyncIterator[str]:
    """The URL of a relay to `rpc_url` adding `latency_ms` to every request."""

    async def hold(_body: bytes) -> web.Response | None:
        await asyncio.sleep(latency_ms / 1000)
        return None

    async with node_relay(rpc_url, hold) as url:
        yield url
