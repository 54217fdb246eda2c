"""A relay in front of a node's JSON-RPC endpoint, for benchmarks that change what the
bundler sees of its node (bench/slow_node.py, bench/node_faults.py): each request body is
shown to `intercept` first, which may hold it, or answer it itself instead of the node."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import aiohttp
from aiohttp import web

from entryway.devnet.anvil import free_port

# Given a request's body: an answer of its own, or None to pass the request on.
Intercept = Callable[[bytes], Awaitable[web.Response | None]]


@asynccontextmanager
async def node_relay(rpc_url: str, intercept: Intercept) -> AsyncIterator[str]:
    """The URL of a relay to `rpc_url` that shows every request to `intercept` first."""
    async with aiohttp.ClientSession() as session:

        async def relay(request: web.Request) -> web.Response:
            body = await request.read()
            answered = await intercept(body)
            if answered is not None:
                return answered
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
