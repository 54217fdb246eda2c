"""The caller's rate-limit headers (`X-RateLimit-*`, `Retry-After`) on every answer, whichever
route or error handler gave it: authentication and the JSON-RPC batch admission leave them in
the request's state, and they are added here as the answer starts.

A plain ASGI middleware rather than `@app.middleware("http")`: Starlette runs that kind in a
task of its own per request, with a memory stream between it and the app, which on the
receipt polls clients send ten times a second costs as much CPU as the poll's own answer."""

from __future__ import annotations

from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

STATE_KEY = "rate_limit_headers"  # request.state.rate_limit_headers, a dict of headers


class RateLimitHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_limits(message: Message) -> None:
            if message["type"] == "http.response.start":
                state: dict[str, Any] = scope.get("state") or {}
                chosen: dict[str, str] = state.get(STATE_KEY) or {}
                if chosen:
                    headers = MutableHeaders(scope=message)
                    for name, value in chosen.items():
                        if name not in headers:  # a route's own value wins
                            headers[name] = value
            await send(message)

        await self.app(scope, receive, send_with_limits)
