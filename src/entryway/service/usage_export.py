"""A project's usage events as a CSV or JSON download, and the window they are read from.
The API's export and the dashboard's export buttons both answer with `export_response`, so
the same project and window give the same bytes wherever they are downloaded from."""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator
from datetime import datetime, timedelta
from typing import Literal

import orjson
from fastapi.responses import StreamingResponse

from entryway.storage.usage import UsageEvent, UsageQueries

ExportFormat = Literal["csv", "json"]
EXPORT_FIELDS = (
    "eventId", "createdAt", "operation", "credits", "overage", "status", "keyId", "endpoint",
    "chainId", "subject", "idempotencyKey", "l1FeeWei", "l1FeeCredits",
)  # fmt: skip
DEFAULT_WINDOW = timedelta(days=30)


class UsageWindowError(ValueError):
    """A window that ends before it starts."""


def usage_window(
    since: datetime | None, until: datetime | None, now: datetime
) -> tuple[datetime, datetime]:
    """[since, until): both already in UTC; until defaults to now, since to 30 days before."""
    until = until or now
    since = since or until - DEFAULT_WINDOW
    if since >= until:
        raise UsageWindowError("since must be before until")
    return since, until


async def csv_chunks(events: AsyncIterator[UsageEvent]) -> AsyncIterator[str]:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=EXPORT_FIELDS)
    writer.writeheader()
    async for e in events:
        writer.writerow(e.as_dict())
        if out.tell() > 64_000:
            yield out.getvalue()
            out.seek(0)
            out.truncate()
    yield out.getvalue()


async def json_chunks(events: AsyncIterator[UsageEvent]) -> AsyncIterator[bytes]:
    yield b"["
    first = True
    async for e in events:
        yield (b"" if first else b",") + orjson.dumps(e.as_dict())
        first = False
    yield b"]"


def export_response(
    usage: UsageQueries,
    project_id: str,
    since: datetime,
    until: datetime,
    format: ExportFormat,
) -> StreamingResponse:
    """Every usage event of the project in [since, until), oldest first, streamed as an
    attachment named after the window."""
    events = usage.events(project_id, since, until)
    name = f"usage-{since:%Y%m%d}-{until:%Y%m%d}.{format}"
    headers = {"Content-Disposition": f'attachment; filename="{name}"'}
    if format == "csv":
        return StreamingResponse(csv_chunks(events), media_type="text/csv", headers=headers)
    return StreamingResponse(json_chunks(events), media_type="application/json", headers=headers)
