"""`GET /v1/requests`: the caller's project's request log, newest first, filtered, by cursor.
An admin key reads it; another project's calls are never in it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from entryway.service.auth import AdminCaller
from entryway.service.problems import Problem
from entryway.storage.request_log import LogFilter, LoggedCall, RequestLogRecords

MAX_LIMIT = 200


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class LoggedCallOut(_Model):
    id: str
    at: datetime
    key_prefix: str
    chain_id: int | None
    method: str
    outcome: str
    http_status: int
    rpc_code: int | None
    message: str | None
    explanation: str | None
    latency_ms: float
    sender: str | None
    nonce: str | None
    user_op_hash: str | None
    calls: int  # more than 1: calls over the per-minute cap, summarised in one entry

    @classmethod
    def of(cls, call: LoggedCall) -> LoggedCallOut:
        return cls(
            id=str(call.entry_id),
            at=call.at,
            key_prefix=call.key_prefix,
            chain_id=call.chain_id,
            method=call.method,
            outcome=call.outcome,
            http_status=call.http_status,
            rpc_code=call.rpc_code,
            message=call.message,
            explanation=call.explanation,
            latency_ms=call.latency_us / 1000,
            sender=call.sender,
            nonce=call.nonce,
            user_op_hash=call.user_op_hash,
            calls=call.calls,
        )


class RequestLogPage(_Model):
    requests: list[LoggedCallOut]
    next_cursor: str | None  # pass as `cursor` for the older calls; None: no more


def cursor_value(cursor: str | None) -> int | None:
    if cursor is None:
        return None
    if not (cursor.isascii() and cursor.isdigit() and len(cursor) <= 19):
        raise Problem(422, "invalid_cursor", "Invalid cursor", "pass back a nextCursor as given")
    return int(cursor)


async def log_page(
    records: RequestLogRecords, project_id: str, where: LogFilter, cursor: str | None, limit: int
) -> RequestLogPage:
    """One page of the log and the cursor of the next (shared by the API and the dashboard)."""
    calls = await records.page(project_id, where, before=cursor_value(cursor), limit=limit + 1)
    more = len(calls) > limit
    calls = calls[:limit]
    return RequestLogPage(
        requests=[LoggedCallOut.of(c) for c in calls],
        next_cursor=str(calls[-1].entry_id) if more and calls else None,
    )


def _utc(moment: datetime | None) -> datetime | None:
    """A time without an offset is taken as UTC."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


def request_log_routes() -> APIRouter:
    router = APIRouter()

    @router.get("/v1/requests", operation_id="listRequests", tags=["requests"])
    async def list_requests(
        who: AdminCaller,
        request: Request,
        method: Annotated[str | None, Query(max_length=100)] = None,
        outcome: Literal["ok", "error"] | None = None,
        chain_id: Annotated[int | None, Query(alias="chainId", ge=1, le=2**53)] = None,
        key: Annotated[str | None, Query(max_length=16)] = None,
        sender: Annotated[str | None, Query(pattern=r"^0x[0-9a-fA-F]{40}$")] = None,
        since: datetime | None = None,
        until: datetime | None = None,
        cursor: Annotated[str | None, Query(max_length=19)] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 50,
    ) -> RequestLogPage:
        """The project's calls, newest first: method or route, outcome (HTTP status, JSON-RPC
        code, message and its plain explanation), latency, and for UserOperation calls the
        sender, nonce and userOpHash. `key` is a key's prefix; `since`/`until` ISO 8601."""
        where = LogFilter(method, outcome, chain_id, key, sender, _utc(since), _utc(until))
        records = RequestLogRecords(request.app.state.services.store.engine)
        return await log_page(records, who.project_id, where, cursor, limit)

    return router
