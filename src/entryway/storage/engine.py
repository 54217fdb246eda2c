"""Engines and migrations: one URL decides SQLite or PostgreSQL."""

from __future__ import annotations

import math
import time
from importlib import resources
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import event
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from entryway.storage.private_files import prepare_sqlite_file, sqlite_path

# A pooled connection idle this long is pinged before use (`_ping_if_idle`).
IDLE_PING_SECONDS = 5.0


def sqlite_url(data_dir: Path) -> str:
    return f"sqlite+aiosqlite:///{data_dir / 'entryway.sqlite3'}"


def make_engine(url: str) -> AsyncEngine:
    if url.startswith("postgresql://"):
        url = "postgresql+asyncpg://" + url.removeprefix("postgresql://")
    if url.startswith("sqlite"):
        # One connection: SQLite has one writer at a time anyway, and a transaction that
        # reads and then writes fails at once (SQLITE_BUSY, no waiting) when another
        # connection of the same process committed in between. One connection serialises a
        # process's units of work instead; busy_timeout covers other processes.
        path = sqlite_path(url)
        if path is not None:
            prepare_sqlite_file(path)  # 0600 before SQLite makes it (and its WAL) 0644
        engine = create_async_engine(url, pool_size=1, max_overflow=0, pool_timeout=60)
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    engine = create_async_engine(url)
    event.listen(engine.sync_engine, "checkin", _note_checkin)
    event.listen(engine.sync_engine, "checkout", _ping_if_idle)
    return engine


def _note_checkin(_: object, record: Any) -> None:
    record.info["checked_in"] = time.monotonic()


def _ping_if_idle(dbapi_connection: Any, record: Any, _: object) -> None:
    """Ping a pooled PostgreSQL connection before use only when it sat idle long enough to
    have been dropped (a database restart, an idle timeout, a firewall): a busy connection is
    used at once. SQLAlchemy's own pre-ping would cost three round trips (BEGIN, a statement,
    ROLLBACK with asyncpg) on every checkout, each a turn of a busy event loop. A connection
    that died while in use fails its statement instead: the error invalidates the whole pool
    (each connection is replaced at its next checkout) and the request is answered 503 with
    Retry-After, as during any outage."""
    idle = time.monotonic() - record.info.get("checked_in", math.inf)
    if idle < IDLE_PING_SECONDS:
        return
    try:
        dbapi_connection.ping()
    except Exception as exc:  # any failure: the pool connects anew (DisconnectionError)
        raise DisconnectionError(f"pooled connection idle {idle:.0f} s is gone") from exc


def _sqlite_pragmas(dbapi_connection: Any, _: object) -> None:
    """WAL: readers never wait for the writer, and a commit appends to the log instead of
    rewriting pages (synchronous=NORMAL is durable across a process crash; a power loss may
    lose the last commits, never corrupt). busy_timeout: a writer waits for the lock instead
    of failing at once."""
    cursor = dbapi_connection.cursor()
    for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "busy_timeout=5000"):
        cursor.execute(f"PRAGMA {pragma}")
    cursor.close()


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(resources.files(__package__) / "migrations"))
    config.set_main_option("sqlalchemy.url", url)
    return config


async def migrate(engine: AsyncEngine) -> None:
    """Bring the schema to the latest revision (idempotent)."""

    def upgrade(connection: object) -> None:
        config = alembic_config(str(engine.url))
        config.attributes["connection"] = connection
        command.upgrade(config, "head")

    async with engine.begin() as connection:
        await connection.run_sync(upgrade)
