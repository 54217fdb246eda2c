"""What the request log is told about each call: REST calls by a middleware (route template,
status, problem code and detail, latency), JSON-RPC calls one by one by the RPC route (method,
error code, message and explanation, and for UserOperation calls the sender, nonce and
userOpHash). Only authenticated calls are logged: the project is the key's, and only the key's
prefix is kept. Recording appends to memory; it never waits for the database, and it wraps
nothing of the request: what it needs of the answer, `RateLimitHeaders` notes as it sends it."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send

from entryway.domain.explanations import explain
from entryway.service.rate_limit_headers import ANSWER_STATUS, REFUSAL_BODY
from entryway.service.revert_text import revert_text
from entryway.service.services import Services
from entryway.storage.request_log import LoggedCall
from entryway.storage.store import Caller

MAX_MESSAGE = 500  # characters of an error's message kept
RPC_LOGGED = "rpc_logged"  # on the request's state once the JSON-RPC route logged a call


class CallRecording:
    """ASGI middleware logging every authenticated REST call (JSON-RPC is logged per call by
    its route). The caller is what authentication left on the request's state; the answer's
    status and a refusal's body are what `RateLimitHeaders`, inside this one, noted there."""

    def __init__(self, app: ASGIApp, *, services: Services) -> None:
        self.app = app
        self.services = services

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        recorder = self.services.request_log
        if scope["type"] != "http" or recorder is None:
            await self.app(scope, receive, send)
            return
        started = time.perf_counter_ns()
        try:
            await self.app(scope, receive, send)
        finally:
            state = scope.get("state") or {}
            caller = state.get("caller")
            # A JSON-RPC call is logged by its route; here only a request refused before
            # any call ran (rate limit, chain access), as `POST /rpc/{chain_id}`.
            if isinstance(caller, Caller) and not state.get(RPC_LOGGED):
                # No answer started: an exception the edge turns into a 500.
                status = int(state.get(ANSWER_STATUS, 500))
                route = getattr(scope.get("route"), "path", None) or "unrouted"
                code, detail = (
                    _problem(bytes(state.get(REFUSAL_BODY, b""))) if status >= 400 else (None, None)
                )
                recorder.record(
                    LoggedCall(
                        project_id=caller.project_id,
                        at=datetime.now(UTC),
                        key_prefix=caller.key_id,
                        chain_id=_chain_of(scope, route),
                        method=f"{scope['method']} {route}",
                        outcome="ok" if status < 400 else "error",
                        http_status=status,
                        latency_us=(time.perf_counter_ns() - started) // 1000,
                        message=f"{code}: {detail}" if code else None,
                    )
                )


def _problem(body: bytes) -> tuple[str | None, str | None]:
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None, None
    if not isinstance(doc, dict):
        return None, None
    detail = str(doc.get("detail") or doc.get("title") or "")[:MAX_MESSAGE]
    return (str(doc["code"]) if "code" in doc else None), detail


def _chain_of(scope: Scope, route: str) -> int | None:
    if route == "/rpc/{chain_id}":
        chain = str(scope.get("path_params", {}).get("chain_id", ""))
        return int(chain) if chain.isdigit() and len(chain) <= 16 else None
    for part in scope.get("query_string", b"").decode("latin-1").split("&"):
        name, _, value = part.partition("=")
        if name == "chainId" and value.isdigit() and len(value) <= 16:
            return int(value)
    return None


def explained(answer: dict[str, Any] | None) -> str | None:
    """Put the plain explanation of a JSON-RPC error into its `data.explanation` (when `data`
    is absent or an object) and return it."""
    error = answer.get("error") if answer is not None else None
    if not isinstance(error, dict):
        return None
    data = error.get("data")
    text = explain(int(error.get("code", 0)), str(error.get("message", "")), data, revert_text)
    if text is not None and (data is None or isinstance(data, dict)):
        error["data"] = {**(data or {}), "explanation": text}
    return text


def rpc_call(
    who: Caller,
    chain_id: int,
    method: str,
    payload: Any,
    answer: dict[str, Any] | None,
    *,
    started_ns: int,
    http_status: int,
    explanation: str | None,
) -> LoggedCall:
    """One JSON-RPC call as the log keeps it; `method` is already the bounded name."""
    error = answer.get("error") if answer is not None else None
    sender = nonce = op_hash = None
    if method.startswith(("rpc:pm_", "rpc:eth_sendUserOperation", "rpc:eth_estimateUser")):
        sender, nonce = _op_fields(payload)
        result = answer.get("result") if answer is not None else None
        if method == "rpc:eth_sendUserOperation" and isinstance(result, str):
            op_hash = result.lower()[:66]
    failed = isinstance(error, dict)
    return LoggedCall(
        project_id=who.project_id,
        at=datetime.now(UTC),
        key_prefix=who.key_id,
        chain_id=chain_id,
        method=method,
        outcome="error" if failed or http_status >= 400 else "ok",
        http_status=http_status,
        latency_us=(time.perf_counter_ns() - started_ns) // 1000,
        rpc_code=int(error.get("code", 0)) if isinstance(error, dict) else None,
        message=str(error.get("message", ""))[:MAX_MESSAGE] if isinstance(error, dict) else None,
        explanation=explanation,
        sender=sender,
        nonce=nonce,
        user_op_hash=op_hash,
    )


def _op_fields(payload: Any) -> tuple[str | None, str | None]:
    params = payload.get("params") if isinstance(payload, dict) else None
    op = params[0] if isinstance(params, list) and params else None
    if not isinstance(op, dict):
        return None, None
    sender, nonce = op.get("sender"), op.get("nonce")
    return (
        sender.lower()[:42] if isinstance(sender, str) else None,
        nonce[:66] if isinstance(nonce, str) else None,
    )
