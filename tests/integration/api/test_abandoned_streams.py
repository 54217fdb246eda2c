"""Clients that go away in the middle of a streamed answer, through a real uvicorn server on
SQLite and PostgreSQL: the usage export of a large window dropped after its first bytes gives
every database connection back to the pool at once (nothing is left for the garbage
collector to find checked out, which SQLAlchemy would report with a warning), and the
service serves on."""

from __future__ import annotations

import asyncio
import gc
import socket
import struct
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
import uvicorn
from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.service.app import create_app
from entryway.storage.schema import usage_events
from tests.integration.api.conftest import Api, make_api
from tests.integration.storage.conftest import engine  # noqa: F401 - the fixture

EVENTS = 6_000  # an export of a few megabytes: more than the sockets' buffers hold
DROPS = 3


@pytest.fixture
async def served(engine: AsyncEngine) -> AsyncIterator[tuple[str, Api]]:  # noqa: F811
    async for api in make_api(engine):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        config = uvicorn.Config(
            create_app(api.services), lifespan="off", log_config=None, http="h11", ws="none",
            access_log=False,
        )  # fmt: skip
        server = uvicorn.Server(config)
        task = asyncio.create_task(server.serve(sockets=[sock]))
        for _ in range(1000):  # uvicorn offers a flag, not an event
            if server.started:
                break
            await asyncio.sleep(0.01)
        assert server.started, "uvicorn did not start"
        try:
            yield f"http://127.0.0.1:{port}", api
        finally:
            server.should_exit = True
            await task
            sock.close()


async def _many_events(engine: AsyncEngine, project_id: str) -> None:  # noqa: F811
    start = datetime.now(UTC) - timedelta(days=1)
    rows = [
        {
            "event_id": str(uuid.uuid4()),
            "project_id": project_id,
            "idempotency_key": f"read:{n}",
            "operation": "read",
            "credits": 1,
            "overage": 0,
            # Pairs share a moment: a page may end between them (the export pages by
            # moment, then event id).
            "created_at": start + timedelta(milliseconds=n // 2),
            "endpoint": "account-info",
            "status": "settled",
        }
        for n in range(EVENTS)
    ]
    async with engine.begin() as db:
        await db.execute(insert(usage_events), rows)


async def _read_some_then_vanish(base: str, path: str, key: str) -> None:
    """Ask for `path`, read the head of the answer, then reset the connection."""
    host, port = base.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    request = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n\r\n"
    writer.write(request.encode())
    await writer.drain()
    head = await reader.read(4096)
    assert head.startswith(b"HTTP/1.1 200"), head[:200]
    raw = writer.get_extra_info("socket")
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST
    writer.close()


async def test_an_export_dropped_midway_gives_its_connection_back(
    served: tuple[str, Api],
    engine: AsyncEngine,  # noqa: F811
) -> None:
    base, api = served
    await _many_events(engine, api.project_id)
    since = (datetime.now(UTC) - timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    for format in ("csv", "json"):
        for _ in range(DROPS):
            path = f"/v1/usage/export?format={format}&since={since}"
            await _read_some_then_vanish(base, path, api.key)
    # The server notices each reset within moments; then nothing may stay checked out, not
    # even until a garbage collection (which would find it and warn).
    for _ in range(100):
        if engine.pool.checkedout() == 0:  # type: ignore[attr-defined]
            break
        await asyncio.sleep(0.05)
    assert engine.pool.checkedout() == 0, engine.pool.status()
    gc.collect()  # a connection still held by an abandoned stream would warn here
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        whole = await http.get("/v1/usage/export", params={"since": since}, headers=api.auth())
    assert whole.status_code == 200
    lines = whole.text.splitlines()
    assert len(lines) == EVENTS + 1  # the header line and every event, once each
    assert len(set(lines)) == EVENTS + 1
