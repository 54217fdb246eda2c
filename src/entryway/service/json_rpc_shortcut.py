"""`POST /rpc/{chain_id}` without FastAPI's per-request machinery.

Bundler clients poll `eth_getUserOperationReceipt` ten times a second per op, and on such a
small call routing (a match against every route), dependency solving and the exception and
exit-stack layers around an endpoint cost more CPU than the call itself. This middleware,
the innermost, calls the JSON-RPC route's own endpoint directly: the caller found as
`current_caller` finds it (key, allowlists, rate limit), the chain id checked as the route's
path parameter is. The body is parsed here once, for the route too (`auth.RPC_PAYLOAD`),
and a request that is one heavy call (estimation, sending, `pm_*`) is marked before the
caller is found, so that its two rate-limit windows are counted in one round trip
(`auth.HEAVY_CALL`); an `eth_sendUserOperation` may run while they are counted
(`late_limit`), and its answer waits for their decision. The route stays declared as it was
(the OpenAPI document, and any request this shortcut leaves alone: a chain id the check
refuses gets the route's own 422). The route is taken from its own router before the app
includes it: FastAPI keeps included routers nested, so the app's route list does not hold it.

An exception raised on the way is answered by the app's own handler for its class (a
`Problem`: 401, 403, 429...); one with no handler goes on to the edge, as from a route."""

from __future__ import annotations

import re
from typing import Any

import orjson
from fastapi.routing import APIRoute, APIRouter
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from entryway.bundler.rpc_batch import is_heavy
from entryway.service import late_limit
from entryway.service.auth import HEAVY_CALL, JSON_RPC_ROUTE, RPC_PAYLOAD, current_caller
from entryway.service.late_limit import MAY_DECIDE_LATE

_PATH = re.compile(r"/rpc/([1-9][0-9]{0,15})")
SEND = "eth_sendUserOperation"
MAX_CHAIN_ID = 2**53  # as the route's path parameter bounds it


class JsonRpcShortcut:
    """Answers `route` (the JSON-RPC route, as its router declared it) without routing."""

    def __init__(self, app: ASGIApp, *, route: APIRoute) -> None:
        self.app = app
        self.route = route

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = (
            _PATH.fullmatch(scope["path"])
            if scope["type"] == "http" and scope["method"] == "POST"
            else None
        )
        chain_id = int(found.group(1)) if found is not None else 0
        if found is None or chain_id > MAX_CHAIN_ID:
            await self.app(scope, receive, send)
            return
        route = self.route
        scope["route"] = route
        scope["endpoint"] = route.endpoint
        scope["path_params"] = {"chain_id": found.group(1)}
        request = Request(scope, receive)
        try:
            payload = _parsed(await request.body())
            if payload is not None:
                setattr(request.state, RPC_PAYLOAD, payload)
                if isinstance(payload, dict) and is_heavy(payload):
                    setattr(request.state, HEAVY_CALL, True)
                    if payload.get("method") == SEND:
                        setattr(request.state, MAY_DECIDE_LATE, True)
            who = await current_caller(request, None)
            try:
                response = await route.endpoint(who=who, chain_id=chain_id, request=request)
            except Exception:
                await late_limit.settle(request)  # refused by its windows: that answer
                raise
            await late_limit.settle(request)
        except Exception as exc:  # answered as a route's would be, or on to the edge
            response = await _handled(scope, request, exc)
        await response(scope, receive, send)


def _parsed(body: bytes) -> Any:
    """The body's JSON, once, for the route (`auth.RPC_PAYLOAD`); None when it is not JSON
    (the route answers the parse error)."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None


def json_rpc_route(router: APIRouter) -> APIRoute:
    """The JSON-RPC route among `router`'s own routes."""
    method, path = JSON_RPC_ROUTE
    return next(
        r
        for r in router.routes
        if isinstance(r, APIRoute) and r.path == path and method in (r.methods or ())
    )


async def _handled(scope: Scope, request: Request, exc: Exception) -> Any:
    """The app's answer to `exc`, by the handler it registered for the exception's class
    (`Problem`, `HTTPException`); `exc` raised again when it registered none."""
    handlers = scope["app"].exception_handlers
    handler = next((handlers[k] for k in type(exc).__mro__ if k in handlers), None)
    if handler is None:
        raise exc
    return await handler(request, exc)
