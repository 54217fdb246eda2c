"""Requests: the project's request log, with the filters and cursor of `GET /v1/requests`;
a refused call shows its message and its plain explanation (the same text as the JSON-RPC
error's `data.explanation`)."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Request
from fastapi.responses import Response

from entryway.dashboard import web
from entryway.service.problems import Problem
from entryway.service.routes_requests import log_page
from entryway.storage.request_log import LogFilter, RequestLogRecords

PAGE_SIZE = 50
FILTERS = ("method", "outcome", "chain", "key", "sender", "since", "until")


def _when(value: str) -> datetime | None:
    """A `datetime-local` field (UTC); None when empty or unreadable."""
    try:
        moment = datetime.fromisoformat(value) if value else None
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment and moment.tzinfo is None else moment


def log_filter(chosen: dict[str, str]) -> LogFilter:
    chain = chosen["chain"]
    sender = chosen["sender"]
    return LogFilter(
        method=chosen["method"] or None,
        outcome=chosen["outcome"] if chosen["outcome"] in ("ok", "error") else None,
        chain_id=int(chain) if chain.isascii() and chain.isdigit() and len(chain) < 17 else None,
        key_prefix=chosen["key"] or None,
        sender=sender if len(sender) == 42 and sender.startswith("0x") else None,
        since=_when(chosen["since"]),
        until=_when(chosen["until"]),
    )


def routes() -> APIRouter:
    router = APIRouter()

    @router.get("/projects/{project_id}/requests")
    async def requests(request: Request, project_id: str, who: web.SignedIn) -> Response:
        page = await web.project_page(request, who, project_id)
        query = request.query_params
        chosen = {name: query.get(name, "").strip()[:100] for name in FILTERS}
        records = RequestLogRecords(web.services(request).store.engine)
        cursor = query.get("cursor") or None
        try:
            found = await log_page(records, project_id, log_filter(chosen), cursor, PAGE_SIZE)
        except Problem:  # a cursor not given by this page: start from the newest
            found = await log_page(records, project_id, log_filter(chosen), None, PAGE_SIZE)
        context = {
            "page": page,
            "section": "requests",
            "chosen": chosen,
            "found": found,
            "filters": {k: v for k, v in chosen.items() if v},
        }
        return web.render(request, who, "requests.html", context)

    return router
