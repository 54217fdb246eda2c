"""Usage: a project's live balance and consumption rate (server-sent events), breakdowns by
operation type and endpoint, daily, weekly and monthly trends with the cycle forecast,
overage and low-balance alerts, and the export, byte for byte the API's; and the same
analytics across all of the viewer's projects."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import TypeAdapter, ValidationError
from sqlalchemy import select

from entryway.dashboard import web
from entryway.dashboard.charts import Bar, bar_list, column_chart
from entryway.dashboard.live_streams import STREAM_SECONDS, StreamSlots
from entryway.dashboard.usage_figures import (
    chart_bars,
    combined,
    live_figures,
    named_keys,
    project_trend,
    rows,
    summed,
    window_total,
)
from entryway.dashboard.usage_trends import TREND_GROUPINGS, periods
from entryway.service.schemas import Moment
from entryway.service.usage_export import (
    ExportFormat,
    UsageWindowError,
    export_response,
    key_names,
    usage_window,
)
from entryway.storage.schema import projects

CHECK_SECONDS = 1.0  # how often a live stream looks at the figures
HEARTBEAT_SECONDS = 15.0  # a comment line when nothing changed, so proxies keep it open
MAX_PROJECTS = 100  # projects summed on the cross-project page
moments: TypeAdapter[datetime] = TypeAdapter(Moment)  # the API's own date rule


def _moment(value: str | None, name: str) -> datetime | None:
    if not value:
        return None
    try:
        return moments.validate_python(value[:64])
    except ValidationError:
        raise web.DashboardError(
            400, f"{name} must be a date (YYYY-MM-DD) or a date and time from 2000 on."
        ) from None


def page_window(request: Request, now: datetime) -> tuple[datetime, datetime]:
    """The window the page's breakdowns cover: from the `from` date to the end of the `to`
    date (a full date and time is taken as it is); by default the API's own window, the 30
    days up to now."""
    raw_to = request.query_params.get("to")
    since = _moment(request.query_params.get("from"), "From")
    until = _moment(raw_to, "To")
    if until is not None and raw_to is not None and len(raw_to) == 10:
        until += timedelta(days=1)  # a date: through its end
    try:
        return usage_window(since, until, now)
    except UsageWindowError:
        raise web.DashboardError(400, "The From date must come before the To date.") from None


def grouping_of(request: Request) -> str:
    grouping = request.query_params.get("grouping", "day")
    return grouping if grouping in TREND_GROUPINGS else "day"


async def viewer_projects(request: Request, who: web.Viewer) -> list[str]:
    """The viewer's project ids: a member's own; every project for the operator."""
    if who.user_id is not None:
        return (await web.accounts(request).project_ids(who.user_id))[:MAX_PROJECTS]
    async with web.services(request).store.engine.connect() as db:
        query = select(projects.c.project_id).order_by(projects.c.created_at).limit(MAX_PROJECTS)
        return list((await db.execute(query)).scalars())


def live_events(
    request: Request, project_id: str, slots: StreamSlots, slot: str
) -> AsyncIterator[str]:
    """`usage` events: the figures at once, then whenever they change; a comment line when
    quiet; ends when the client goes away or the stream has lived STREAM_SECONDS."""
    services = web.services(request)

    async def events() -> AsyncIterator[str]:
        try:
            yield "retry: 3000\n\n"
            sent = None
            ends = time.monotonic() + STREAM_SECONDS
            last_write = time.monotonic()
            while time.monotonic() < ends and not await request.is_disconnected():
                figures = await live_figures(services, project_id, web.now())
                if figures != sent:
                    data = orjson.dumps(figures.as_event()).decode()
                    yield f"event: usage\ndata: {data}\n\n"
                    sent, last_write = figures, time.monotonic()
                elif time.monotonic() - last_write >= HEARTBEAT_SECONDS:
                    yield ": quiet\n\n"
                    last_write = time.monotonic()
                await asyncio.sleep(CHECK_SECONDS)
        finally:
            slots.give_back(slot)

    return events()


def window_context(
    since: datetime, until: datetime, grouping: str, trend: Any, chart_note: str
) -> dict[str, Any]:
    """What both usage pages show of their window: its bounds, the grouping switch and the
    trend chart with its forecast."""
    return {
        "since": since,
        "until": until,
        "to_date": (until - timedelta(microseconds=1)).date(),
        "grouping": grouping,
        "groupings": TREND_GROUPINGS,
        "trend": trend,
        "trend_chart": column_chart(
            trend.bars, title=f"Credits per {grouping}{chart_note}", forecast=trend.forecast
        ),
    }


def routes() -> APIRouter:
    router = APIRouter()
    slots = StreamSlots()

    @router.get("/projects/{project_id}/usage")
    async def project_usage(request: Request, project_id: str, who: web.SignedIn) -> Response:
        page = await web.project_page(request, who, project_id)
        services = web.services(request)
        usage = services.platform.usage
        now = web.now()
        error, status = None, 200
        try:
            since, until = page_window(request, now)
        except web.DashboardError as exc:
            error, status = exc.message, exc.status
            since, until = usage_window(None, None, now)
        grouping = grouping_of(request)
        figures = await live_figures(services, project_id, now)
        trend = await project_trend(usage, page.project, figures, grouping, now)
        by_operation = rows(await usage.breakdown(project_id, since, until, "operation"))
        by_endpoint = rows(await usage.breakdown(project_id, since, until, "endpoint"))
        by_key = rows(
            named_keys(
                await usage.breakdown(project_id, since, until, "key"),
                await services.store.keys(project_id),
            )
        )
        await services.platform.meter.check_due_alerts()  # as /v1/alerts does
        context: dict[str, Any] = {
            "page": page,
            "section": "usage",
            "error": error,
            "figures": figures,
            "cycle": page.project.subscription,
            **window_context(
                since, until, grouping, trend, ", with the forecast to the cycle's end"
            ),
            "by_operation": by_operation,
            "operation_chart": bar_list(chart_bars(by_operation), title="Credits by operation"),
            "by_endpoint": by_endpoint,
            "endpoint_chart": bar_list(chart_bars(by_endpoint), title="Credits by endpoint"),
            "by_key": by_key,
            "key_chart": bar_list(chart_bars(by_key), title="Credits by API key"),
            "alerts": await services.platform.billing.alerts(project_id),
            "export_query": urlencode({"from": since.isoformat(), "to": until.isoformat()}),
        }
        return web.render(request, who, "usage.html", context, status=status)

    @router.get("/projects/{project_id}/usage/live")
    async def live(request: Request, project_id: str, who: web.SignedIn) -> Response:
        await web.project_page(request, who, project_id)
        slot = slots.take(who.csrf_token)  # one per session: its CSRF token is its own
        if slot is None:
            raise web.DashboardError(
                429, "Too many live usage views are open. Close some tabs and reload."
            )
        return StreamingResponse(
            live_events(request, project_id, slots, slot),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    @router.get("/projects/{project_id}/usage/export")
    async def export(request: Request, project_id: str, who: web.SignedIn) -> Response:
        """The API's export (`GET /v1/usage/export`) for the same window: the same bytes."""
        await web.project_page(request, who, project_id)
        raw = request.query_params.get("format", "csv")
        if raw not in ("csv", "json"):
            raise web.DashboardError(400, "Export as csv or json.")
        fmt: ExportFormat = "csv" if raw == "csv" else "json"
        since = _moment(request.query_params.get("from"), "From")
        until = _moment(request.query_params.get("to"), "To")
        try:
            start, end = usage_window(since, until, web.now())
        except UsageWindowError:
            raise web.DashboardError(400, "The From date must come before the To date.") from None
        services = web.services(request)
        names = key_names(await services.store.keys(project_id))
        return export_response(services.platform.usage, project_id, start, end, fmt, names)

    @router.get("/usage")
    async def all_usage(request: Request, who: web.SignedIn) -> Response:
        services = web.services(request)
        store, usage = services.store, services.platform.usage
        now = web.now()
        error, status = None, 200
        try:
            since, until = page_window(request, now)
        except web.DashboardError as exc:
            error, status = exc.message, exc.status
            since, until = usage_window(None, None, now)
        grouping = grouping_of(request)
        found = [await store.project(pid) for pid in await viewer_projects(request, who)]
        through = max((p.subscription.cycle_end for p in found), default=now)
        shown = periods(grouping, now, through)
        table, trends, operations = [], [], []
        for project in found:
            figures = await live_figures(services, project.project_id, now)
            by_operation = await usage.breakdown(project.project_id, since, until, "operation")
            operations.append(by_operation)
            trends.append(await project_trend(usage, project, figures, grouping, now, shown))
            table.append((project, figures, window_total(by_operation)))
        trend = summed(trends, grouping, shown)
        by_operation_all = rows(combined(operations))
        context: dict[str, Any] = {
            "error": error,
            "table": table,
            **window_context(
                since, until, grouping, trend, " across your projects, with the forecast"
            ),
            "by_operation": by_operation_all,
            "operation_chart": bar_list(
                chart_bars(by_operation_all), title="Credits by operation, all projects"
            ),
            "project_chart": bar_list(
                [Bar(p.name, c) for p, _, c in sorted(table, key=lambda r: -r[2])][:10],
                title="Credits by project",
            ),
        }
        return web.render(request, who, "usage_all.html", context, status=status)

    return router
