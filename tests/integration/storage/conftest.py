"""The storage tier runs on SQLite and on PostgreSQL (the machine's server, a fresh database
per session, dropped at the end). Without a PostgreSQL server the PostgreSQL half is skipped
loudly, except under CI, where it fails."""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.storage.engine import make_engine, migrate, sqlite_url

ADMIN_URL = os.environ.get(
    "ENTRYWAY_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)


@pytest.fixture(params=["sqlite", "postgresql"])
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    if request.param == "sqlite":
        eng = make_engine(sqlite_url(tmp_path))
        await migrate(eng)
        yield eng
        await eng.dispose()
        return
    try:
        admin = await asyncpg.connect(ADMIN_URL, timeout=5)
    except (OSError, asyncpg.PostgresError) as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"PostgreSQL unavailable at {ADMIN_URL} ({exc}): PostgreSQL tier SKIPPED")
    name = f"entryway_{secrets.token_hex(6)}"
    await admin.execute(f'CREATE DATABASE "{name}"')
    base = ADMIN_URL.rsplit("/", 1)[0]
    eng = make_engine(f"{base}/{name}")
    try:
        await migrate(eng)
        yield eng
    finally:
        await eng.dispose()
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        await admin.close()
