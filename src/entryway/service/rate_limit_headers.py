"""The caller's rate-limit headers (`X-RateLimit-*`, `Retry-After`) on every answer, whichever
route or error handler gave it: authentication and the JSON-RPC batch admission leave them in
the request's state, and they are added here as the answer starts.

The one middleware that watches the answer go out, it also notes on the request's state what
the request log keeps of it (`ANSWER_STATUS`, and a refusal's first bytes in
`REFUSAL_BODY`): the log (`call_recording`) then reads them once the answer is sent instead
of wrapping `send` a second time, so that recording adds no layer to a request.

A plain ASGI middleware rather than `@app.middleware("http")`: Starlette runs that kind in a
task of its own per request, with a memory stream between it and the app, which on the
receipt polls clients send ten times a second costs as much CPU as the poll's own answer."""

from __future__ import annotations

from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

STATE_KEY = "rate_limit_headers"  # request.state.rate_limit_headers, a dict of headers
ANSWER_STATUS = "answer_status"  # the status the answer started with
REFUSAL_BODY = "refusal_body"  # bytearray: the first bytes of an answer >= 400
REFUSAL_BYTES = 8192  # of a refusal's body kept, for its problem code and detail


class RateLimitHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state: dict[str, Any] = scope.setdefault("state", {})

        async def send_with_limits(message: Message) -> None:
            kind = message["type"]
            if kind == "http.response.start":
                status = state[ANSWER_STATUS] = int(message["status"])
                if status >= 400:
                    state[REFUSAL_BODY] = bytearray()
                chosen: dict[str, str] = state.get(STATE_KEY) or {}
                if chosen:
                    headers = MutableHeaders(scope=message)
                    for name, value in chosen.items():
                        if name not in headers:  # a route's own value wins
                            headers[name] = value
            elif kind == "http.response.body" and REFUSAL_BODY in state:
                kept: bytearray = state[REFUSAL_BODY]
                kept.extend(message.get("body", b"")[: REFUSAL_BYTES - len(kept)])
            await send(message)

        await self.app(scope, receive, send_with_limits)
