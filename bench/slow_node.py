"""A node further away: a relay in front of the devnet's JSON-RPC endpoint that holds each
request for a fixed time before passing it on (`bench.bundler --node-latency-ms`). A hosted
node answers a request in tens of milliseconds where anvil on the same machine answers in
one: what a bundler does while it waits for the node shows only with the wait put back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
from aiohttp import web

from entryway.devnet.anvil import free_port


@asynccontextmanager
async def slow_node(rpc_url: str, latency_ms: float) -> AsyncIterator[str]:
    """The URL of a relay to `rpc_url` adding `latency_ms` to every request."""
    async with aiohttp.ClientSession() as session:

        async def relay(request: web.Request) -> web.Response:
            body = await request.read()
            await asyncio.sleep(latency_ms / 1000)
            async with session.post(
                rpc_url, data=body, headers={"Content-Type": "application/json"}
            ) as answer:
                return web.Response(
                    body=await answer.read(), status=answer.status, content_type="application/json"
                )

        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/", relay)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        try:
            yield f"http://127.0.0.1:{port}/"
        finally:
            await runner.cleanup()
