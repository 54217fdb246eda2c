"""Engines and migrations: one URL decides SQLite or PostgreSQL."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from entryway.storage.private_files import prepare_sqlite_file, sqlite_path


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
    return create_async_engine(url, pool_pre_ping=True)


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
