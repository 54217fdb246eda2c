"""The request log's storage, on SQLite and PostgreSQL: calls are written in groups, a flood
is bounded per project per minute (the rest summarised), pages come newest first by cursor
and filters, and each plan's retention prunes what it keeps no longer."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.apikeys import KeyEnvironment
from entryway.domain.plans import PlanName
from entryway.service.request_log import OVER_CAP_NOTE, RequestRecorder
from entryway.service.routes_requests import log_page
from entryway.settings.model import RequestLogSettings
from entryway.storage.request_log import LogFilter, LoggedCall, RequestLogRecords
from entryway.storage.schema import request_log
from entryway.storage.store import Store

NOW = datetime(2026, 3, 2, 12, 0, 30, tzinfo=UTC)


async def _project(store: Store, plan: PlanName) -> str:
    owner = await store.create_user(f"{uuid.uuid4().hex}@example.org", NOW)
    pid = await store.create_project(owner, "p", plan, [80002], NOW)
    await store.issue_key(pid, KeyEnvironment.TEST, [80002], NOW)
    return pid


def _call(pid: str, method: str = "rpc:eth_chainId", **extra: object) -> LoggedCall:
    fields: dict[str, object] = {
        "project_id": pid,
        "at": NOW,
        "key_prefix": "ab12cd34",
        "chain_id": 80002,
        "method": method,
        "outcome": "ok",
        "http_status": 200,
        "latency_us": 1500,
    }
    return LoggedCall(**{**fields, **extra})  # type: ignore[arg-type]


async def _rows(engine: AsyncEngine) -> int:
    async with engine.connect() as db:
        return int(await db.scalar(select(func.count()).select_from(request_log)) or 0)


async def test_a_flood_is_bounded_per_project_and_minute(engine: AsyncEngine) -> None:
    store = Store(engine)
    flooder, quiet = await _project(store, PlanName.FREE), await _project(store, PlanName.PRO)
    settings = RequestLogSettings(per_project_per_minute=5)
    recorder = RequestRecorder(RequestLogRecords(engine), settings, clock=lambda: NOW)
    for i in range(1000):
        recorder.record(_call(flooder, "rpc:unknown" if i % 2 else "rpc:eth_chainId"))
    recorder.record(_call(quiet))
    await recorder.flush()
    assert await _rows(engine) == 6  # the quiet project's call is not crowded out

    later = NOW + timedelta(minutes=1)
    recorder.clock = lambda: later
    await recorder.flush()  # the minute is over: its summaries are written
    page = await log_page(recorder.records, flooder, LogFilter(), None, 50)
    summaries = [c for c in page.requests if c.calls > 1]
    assert sorted((c.method, c.calls) for c in summaries) == [
        ("rpc:eth_chainId", 497),
        ("rpc:unknown", 498),
    ]
    assert all(c.message == OVER_CAP_NOTE for c in summaries)
    assert sum(c.calls for c in page.requests) == 1000
    assert await _rows(engine) == 8


async def test_pages_go_newest_first_by_cursor_and_filters(engine: AsyncEngine) -> None:
    store = Store(engine)
    pid, other = await _project(store, PlanName.FREE), await _project(store, PlanName.FREE)
    records = RequestLogRecords(engine)
    sender = "0x" + "ab" * 20
    calls = [_call(pid, at=NOW + timedelta(seconds=i)) for i in range(5)]
    calls.append(
        _call(pid, "rpc:eth_sendUserOperation", outcome="error", rpc_code=-32500, sender=sender)
    )
    await records.add([*calls, _call(other)])

    first = await log_page(records, pid, LogFilter(), None, 4)
    assert [c.method for c in first.requests][:1] == ["rpc:eth_sendUserOperation"]
    assert first.next_cursor is not None
    rest = await log_page(records, pid, LogFilter(), first.next_cursor, 4)
    assert rest.next_cursor is None
    ids = [c.id for c in first.requests + rest.requests]
    assert len(ids) == len(set(ids)) == 6  # the other project's call is in neither

    refused = await log_page(
        records, pid, LogFilter(outcome="error", sender=sender.upper()), None, 9
    )
    assert [c.rpc_code for c in refused.requests] == [-32500]
    window = LogFilter(since=NOW + timedelta(seconds=1), until=NOW + timedelta(seconds=3))
    assert len((await log_page(records, pid, window, None, 9)).requests) == 2
    by_method = LogFilter(method="rpc:eth_chainId", chain_id=80002, key_prefix="ab12cd34")
    assert len((await log_page(records, pid, by_method, None, 9)).requests) == 5


async def test_retention_is_by_plan(engine: AsyncEngine) -> None:
    store = Store(engine)
    free, paid = await _project(store, PlanName.FREE), await _project(store, PlanName.PRO)
    records = RequestLogRecords(engine)
    two_days_ago, forty_days_ago = NOW - timedelta(days=2), NOW - timedelta(days=40)
    await records.add(
        [
            _call(free, at=NOW),
            _call(free, at=two_days_ago),
            _call(paid, at=two_days_ago),
            _call(paid, at=forty_days_ago),
        ]
    )
    recorder = RequestRecorder(records, RequestLogSettings(), clock=lambda: NOW)
    assert await recorder.prune() == 2
    kept_free = await log_page(records, free, LogFilter(), None, 9)
    kept_paid = await log_page(records, paid, LogFilter(), None, 9)
    assert [c.at for c in kept_free.requests] == [NOW]  # FREE keeps 24 h
    assert [c.at for c in kept_paid.requests] == [two_days_ago]  # paid plans 30 days
