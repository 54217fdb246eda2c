"""The outermost layer of the HTTP service: every request gets an id, every response the
security headers, and every unhandled exception becomes one logged 500 problem, except a
database that cannot be reached (503 `service_unavailable` with Retry-After) and a chain's
node that gave no answer (503 `network_connection_problem` with Retry-After).

Why a pure ASGI middleware rather than `app.exception_handler(Exception)`: Starlette runs
that handler inside its ServerErrorMiddleware, which answers and then re-raises so that the
server may log too; uvicorn then logs the error a second time and drops the keep-alive
connection, so the client's next request on it is reset. Here the exception ends: logged
once with the request id, answered once, and the connection serves on.

An answer sent before the request's body was read to its end (a 413, say) closes the
connection: otherwise the server would go on reading, and discarding, the rest of an upload
the service has already refused.

The request id is the client's `X-Request-Id` when it is short and plain (letters, digits
and `._:-`, at most 64), so that callers can follow a request through their own logs;
anything else is replaced by a fresh id, so that no header can inject text into our logs."""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Collection, Mapping
from typing import Any

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from entryway.bundler.errors import RpcErrorCode
from entryway.chain.transport import RpcTransportError
from entryway.observability.logs import bind_request
from entryway.service.chain_access import NODE_RETRY_AFTER_S
from entryway.service.problems import Problem
from entryway.service.security_headers import security_headers
from entryway.storage.outage import database_unavailable

REQUEST_ID_HEADER = "X-Request-Id"
_SAFE_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}")
DATABASE_RETRY_AFTER_S = 2  # a restart or failover of PostgreSQL takes seconds
log = logging.getLogger(__name__)


def request_id_of(scope: Scope) -> str:
    """The id EdgeMiddleware gave the request ("" outside it)."""
    state: dict[str, Any] = scope.get("state") or {}
    return str(state.get("request_id", ""))


def with_request_id(problem: Problem, scope: Scope) -> Problem:
    """The same problem, its body naming the request (a copy: problems may be reused)."""
    request_id = request_id_of(scope)
    if not request_id:
        return problem
    return Problem(
        problem.status,
        problem.code,
        problem.title,
        problem.detail,
        headers=problem.headers,
        **{**problem.extra, "requestId": request_id},
    )


class EdgeMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        docs_paths: Collection[str] = (),
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.app = app
        self.docs_paths = frozenset(docs_paths)
        self.headers = dict(headers or {})  # on every answer, e.g. the API version

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _incoming_request_id(scope) or uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        path = scope["path"]
        chosen = {**self.headers, **security_headers(path, self.docs_paths)}
        started = False
        unread = _expects_body(scope)

        async def receive_tracked() -> Message:
            nonlocal unread
            message = await receive()
            if message["type"] == "http.request" and not message.get("more_body", False):
                unread = False
            return message

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = MutableHeaders(scope=message)
                for name, value in chosen.items():
                    if name == "Cache-Control":
                        headers[name] = value  # the path's rule wins over the route's
                    else:
                        headers.setdefault(name, value)
                headers[REQUEST_ID_HEADER] = request_id
                if unread:
                    headers["Connection"] = "close"
            await send(message)

        # Lines logged while this request is served carry its id (structlog contextvars).
        with bind_request(request_id):
            try:
                await self.app(scope, receive_tracked, send_with_headers)
            except Exception as exc:
                if not started and database_unavailable(exc):
                    await _unavailable(scope, path, request_id)(
                        scope, receive_tracked, send_with_headers
                    )
                    return
                unanswered = _node_unanswered(exc)
                if not started and unanswered is not None:
                    await _node_unavailable(scope, path, unanswered)(
                        scope, receive_tracked, send_with_headers
                    )
                    return
                log.error(
                    "request %s failed: %s %s",
                    request_id,
                    scope.get("method", ""),
                    path,
                    exc_info=exc,
                    extra={"request_id": request_id},
                )
                if started:
                    # Half an answer is out: nothing sound can follow it; the server closes.
                    return
                problem = Problem(
                    500,
                    "internal_error",
                    "Internal error",
                    f"the service failed; retry later, or report request id {request_id}",
                )
                answer = with_request_id(problem, scope).response(path)
                await answer(scope, receive_tracked, send_with_headers)


def _unavailable(scope: Scope, path: str, request_id: str) -> Response:
    """503 for a request the database could not be reached for: nothing was done, and the
    same request may be sent again shortly (an op, a payment: each is idempotent)."""
    log.warning(
        "request %s: database unavailable: %s %s",
        request_id,
        scope.get("method", ""),
        path,
        extra={"request_id": request_id},
    )
    retry_after = {"Retry-After": str(DATABASE_RETRY_AFTER_S)}
    if path.startswith("/rpc/"):  # a JSON-RPC client reads a JSON-RPC error, never a problem
        error = {"code": -32603, "message": "service unavailable: retry shortly"}
        body = {"jsonrpc": "2.0", "id": None, "error": error}
        return JSONResponse(body, status_code=503, headers=retry_after)
    problem = Problem(
        503,
        "service_unavailable",
        "Service unavailable",
        "the service's database is unavailable (unreachable, or taking no writes); retry shortly",
        headers=retry_after,
    )
    return with_request_id(problem, scope).response(path)


def _node_unanswered(exc: BaseException) -> RpcTransportError | None:
    """The node's silence behind `exc`: itself, or what it was raised from (a use case may
    wrap it in its own error)."""
    seen: BaseException | None = exc
    for _ in range(8):  # a short chain: this is a lookup, not a walk of arbitrary depth
        if seen is None:
            return None
        if isinstance(seen, RpcTransportError):
            return seen
        seen = seen.__cause__
    return None


def _node_unavailable(scope: Scope, path: str, exc: RpcTransportError) -> Response:
    """503 for a request a chain's node gave no answer to, whichever route made the call:
    the node client has logged the outage once, so nothing more is logged here. The message
    is the transport's (the condition, never a host or URL)."""
    retry_after = {"Retry-After": str(NODE_RETRY_AFTER_S)}
    if path.startswith("/rpc/"):
        error = {"code": int(RpcErrorCode.INTERNAL_ERROR), "message": str(exc)}
        body = {"jsonrpc": "2.0", "id": None, "error": error}
        return JSONResponse(body, status_code=503, headers=retry_after)
    problem = Problem(
        503,
        "network_connection_problem",
        "Network connection problem",
        str(exc),
        checks=[{"check": "rpc_reachable", "passed": False, "detail": str(exc)}],
        headers=retry_after,
    )
    return with_request_id(problem, scope).response(path)


def _expects_body(scope: Scope) -> bool:
    headers = Headers(scope=scope)
    length = headers.get("content-length", "")
    chunked = "chunked" in headers.get("transfer-encoding", "").lower()
    return chunked or (length.isascii() and length.isdigit() and length.strip("0") != "")


def _incoming_request_id(scope: Scope) -> str | None:
    value = Headers(scope=scope).get(REQUEST_ID_HEADER)
    if value is not None and _SAFE_REQUEST_ID.fullmatch(value):
        return value
    return None
