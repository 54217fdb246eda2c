"""The request log's recorder: off the request path, bounded under floods.

A call is appended to memory (no await, no I/O) and written with the others of the same
second in one insert, as metering does. Each project has at most `per_minute` calls logged
one by one per UTC minute; the calls beyond are summarised in one row per project, method
and minute (`calls` = how many, outcome and latency of the last), so a flood adds at most
`per_minute` rows plus one per method name (unknown names are all `rpc:unknown`). What
memory holds is bounded too: past `MAX_PENDING` rows a flush has not written yet (a database
down), the newest are dropped and counted. Retention is applied every `PRUNE_SECONDS`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from entryway.domain.plans import PlanName
from entryway.settings.model import RequestLogSettings
from entryway.storage.request_log import LoggedCall, RequestLogRecords

log = logging.getLogger(__name__)
FLUSH_SECONDS = 1.0
PRUNE_SECONDS = 600.0
MAX_PENDING = 50_000
OVER_CAP_NOTE = "calls over the per-minute cap of the request log, summarised"


def retention_by_plan(settings: RequestLogSettings) -> dict[str, timedelta]:
    free = timedelta(hours=settings.retention_free_hours)
    paid = timedelta(hours=settings.retention_paid_hours)
    return {p.value: free if p is PlanName.FREE else paid for p in PlanName}


@dataclass(slots=True)
class _OverCap:
    """The calls of one project and method past the cap this minute: the last, and how many."""

    last: LoggedCall
    calls: int = 1


class RequestRecorder:
    def __init__(
        self,
        records: RequestLogRecords,
        settings: RequestLogSettings | None = None,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.records = records
        self.settings = settings or RequestLogSettings()
        self.clock = clock
        self.retention = retention_by_plan(self.settings)
        self._pending: list[LoggedCall] = []
        self._minute = 0  # the minute (since the epoch) the counts are of; 0: none yet
        self._logged: dict[str, int] = {}  # project -> calls logged one by one this minute
        self._summaries: dict[tuple[str, str], _OverCap] = {}  # (project, method) past the cap
        self.dropped = 0

    def record(self, call: LoggedCall) -> None:
        minute = int(call.at.timestamp()) // 60  # cheaper than formatting the time
        if minute != self._minute:
            self._close_minute()
            self._minute = minute
        logged = self._logged.get(call.project_id, 0)
        if logged < self.settings.per_project_per_minute:
            self._logged[call.project_id] = logged + 1
            self._append(call)
            return
        key = (call.project_id, call.method)
        seen = self._summaries.get(key)
        if seen is None:
            self._summaries[key] = _OverCap(call)
        else:  # the summary is built once, when the minute closes
            seen.last = call
            seen.calls += 1

    def _close_minute(self) -> None:
        for over in self._summaries.values():
            note = OVER_CAP_NOTE if over.last.outcome == "ok" else over.last.message
            self._append(replace(over.last, calls=over.calls, message=note))
        self._summaries.clear()
        self._logged.clear()

    def _append(self, call: LoggedCall) -> None:
        if len(self._pending) >= MAX_PENDING:
            self.dropped += call.calls
            return
        self._pending.append(call)

    async def flush(self) -> None:
        if self._minute and self._minute != int(self.clock().timestamp()) // 60:
            self._close_minute()
        pending, self._pending = self._pending, []
        try:
            await self.records.add(pending)
        except Exception:
            self._pending = pending + self._pending  # kept (bounded) for the next flush
            del self._pending[MAX_PENDING:]
            raise

    async def prune(self) -> int:
        return await self.records.prune(self.retention, self.clock())

    async def close(self) -> None:
        """Write what is left (at shutdown, once `run_forever` is cancelled)."""
        self._close_minute()
        with contextlib.suppress(Exception):
            await self.flush()

    async def run_forever(self) -> None:
        since_prune = PRUNE_SECONDS  # prune once at start
        while True:
            try:
                if since_prune >= PRUNE_SECONDS:
                    since_prune = 0.0
                    await self.prune()
                await self.flush()
            except Exception:
                log.warning("writing the request log failed; retrying", exc_info=True)
            await asyncio.sleep(FLUSH_SECONDS)
            since_prune += FLUSH_SECONDS
