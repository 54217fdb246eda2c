"""A project's usage events as a CSV or JSON download, and the window they are read from.
The API's export and the dashboard's export buttons both answer with `export_response`, so
the same project and window give the same bytes wherever they are downloaded from."""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, Literal

import orjson
from fastapi.responses import StreamingResponse

from entryway.storage.apikeys import KeyInfo
from entryway.storage.usage import UsageEvent, UsageQueries

ExportFormat = Literal["csv", "json"]
EXPORT_FIELDS = (
    "eventId", "createdAt", "operation", "credits", "overage", "status", "keyId", "keyName",
    "endpoint",
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


def _row(event: UsageEvent, key_names: Mapping[str, str]) -> dict[str, Any]:
    """The event as exported: with its key's name (None: an unnamed key, or none)."""
    row = event.as_dict()
    row["keyName"] = key_names.get(event.key_id or "")
    return row


async def csv_chunks(
    events: AsyncIterator[UsageEvent], key_names: Mapping[str, str] | None = None
) -> AsyncIterator[str]:
    names = key_names or {}
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=EXPORT_FIELDS)
    writer.writeheader()
    async for e in events:
        writer.writerow(_row(e, names))
        if out.tell() > 64_000:
            yield out.getvalue()
            out.seek(0)
            out.truncate()
    yield out.getvalue()


async def json_chunks(
    events: AsyncIterator[UsageEvent], key_names: Mapping[str, str] | None = None
) -> AsyncIterator[bytes]:
    names = key_names or {}
    yield b"["
    first = True
    async for e in events:
        yield (b"" if first else b",") + orjson.dumps(_row(e, names))
        first = False
    yield b"]"


def export_response(
    usage: UsageQueries,
    project_id: str,
    since: datetime,
    until: datetime,
    format: ExportFormat,
    key_names: Mapping[str, str] | None = None,
) -> StreamingResponse:
    """Every usage event of the project in [since, until), oldest first, streamed as an
    attachment named after the window; each with its key's name from `key_names` (key id ->
    name), as the key is named now."""
    events = usage.events(project_id, since, until)
    name = f"usage-{since:%Y%m%d}-{until:%Y%m%d}.{format}"
    headers = {"Content-Disposition": f'attachment; filename="{name}"'}
    if format == "csv":
        chunks = csv_chunks(events, key_names)
        return StreamingResponse(chunks, media_type="text/csv", headers=headers)
    body = json_chunks(events, key_names)
    return StreamingResponse(body, media_type="application/json", headers=headers)


def key_names(keys: Iterable[KeyInfo]) -> dict[str, str]:
    """Key id -> name, for the keys that have one (revoked ones too: past events name them)."""
    return {k.key_id: k.name for k in keys if k.name}
