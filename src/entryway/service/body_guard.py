"""Request bodies held to the RequestLimits before any route, dependency or parser sees them.

Why an ASGI middleware rather than a custom Request class on the routers: it guards every
route of the app, those of every router and those added later, and the standalone bundler's
too; and it runs before authentication, so an anonymous client's hostile body costs a bounded
read and a linear scan, nothing more.

A body that is not a form is JSON at this service: it is read whole up to the size limit
(413 past it, before the rest is read, whether or not a Content-Length was sent), checked
by `strict_json` (nesting depth first, without recursion; then RFC 8259, which refuses NaN,
Infinity and numbers beyond a double) and replayed to the app. Whatever parses it next,
FastAPI's stdlib `json` included, sees valid JSON no deeper than the limit. Forms
(multipart, urlencoded) stream through counted, so that the upload route can read a
document as it arrives.

On the JSON-RPC paths the refusals are JSON-RPC errors: -32700 for a body that is not JSON,
-32600 for one too deep or too large (the latter with HTTP 413), never a problem document."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from entryway.service import strict_json
from entryway.service.edge import with_request_id
from entryway.service.limits import RequestLimits
from entryway.service.problems import Problem

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
_FORMS = ("multipart/form-data", "application/x-www-form-urlencoded")


class BodyTooLargeError(HTTPException):
    """Raised from `receive` once a streamed form passes its limit; an HTTPException so that
    FastAPI's form parsing lets it through to the 413 answer."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body may be at most {limit} bytes")
        self.limit = limit


class _ClientGone(Exception):  # noqa: N818 - a signal, not an error
    pass


class BodyGuard:
    def __init__(
        self, app: ASGIApp, *, limits: RequestLimits, is_json_rpc: Callable[[str], bool]
    ) -> None:
        self.app = app
        self.limits = limits
        self.is_json_rpc = is_json_rpc

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rpc = self.is_json_rpc(scope["path"])
        headers = Headers(scope=scope)
        media_type = headers.get("content-type", "").partition(";")[0].strip().lower()
        form = not rpc and media_type in _FORMS
        limit = (
            self.limits.max_upload_bytes
            if form and media_type == "multipart/form-data"
            else self.limits.max_body_bytes
        )
        if _declared_length(headers) > limit:
            await _too_large(scope, rpc, limit)(scope, receive, send)
            return
        if form:
            await self._forward_form(scope, _counted(receive, limit), send, limit)
            return
        try:
            body = await _read_within(receive, limit)
        except _ClientGone:
            return
        if body is None:
            await _too_large(scope, rpc, limit)(scope, receive, send)
            return
        if body:
            try:
                strict_json.loads(body, self.limits.max_json_depth)
            except strict_json.JsonRefusedError as exc:
                await _not_json(scope, rpc, exc)(scope, receive, send)
                return
        await self.app(scope, _replayed(body, receive), send)

    async def _forward_form(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        started = False

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except BodyTooLargeError:
            if started:
                raise
            await _too_large(scope, False, limit)(scope, receive, send)


def _declared_length(headers: Headers) -> int:
    declared = headers.get("content-length", "")
    # The server has already refused a malformed Content-Length; 0 means "not given".
    if not (declared.isascii() and declared.isdigit()):
        return 0
    return int(declared) if len(declared) <= 18 else 2**63


async def _read_within(receive: Receive, limit: int) -> bytes | None:
    """The whole body, or None as soon as it passes `limit` (the rest is never read)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _ClientGone
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replayed(body: bytes, receive: Receive) -> Receive:
    """The body once, then the real channel (whose next message is the disconnect)."""
    pending = True

    async def replay() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _counted(receive: Receive, limit: int) -> Receive:
    size = 0

    async def counted() -> Message:
        nonlocal size
        message = await receive()
        if message["type"] == "http.request":
            size += len(message.get("body", b""))
            if size > limit:
                raise BodyTooLargeError(limit)
        return message

    return counted


def _too_large(scope: Scope, rpc: bool, limit: int) -> Response:
    detail = f"the request body may be at most {limit} bytes"
    if rpc:
        return _rpc_error(INVALID_REQUEST, f"invalid request: {detail}", 413)
    problem = Problem(413, "payload_too_large", "Payload too large", detail, limit=limit)
    return with_request_id(problem, scope).response(scope["path"])


def _not_json(scope: Scope, rpc: bool, exc: strict_json.JsonRefusedError) -> Response:
    if rpc:
        if isinstance(exc, strict_json.JsonTooDeepError):
            return _rpc_error(INVALID_REQUEST, f"invalid request: {exc}")
        return _rpc_error(PARSE_ERROR, f"parse error: {exc}")
    title = "JSON too deep" if isinstance(exc, strict_json.JsonTooDeepError) else "Invalid JSON"
    problem = Problem(400, exc.code, title, str(exc))
    return with_request_id(problem, scope).response(scope["path"])


def _rpc_error(code: int, message: str, status: int = 200) -> Response:
    error = {"code": code, "message": message}
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": None, "error": error}
    return JSONResponse(body, status_code=status)
