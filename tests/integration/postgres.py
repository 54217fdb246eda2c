"""A fresh PostgreSQL database for the tests that run processes on one, dropped afterwards.

Without PostgreSQL the test is skipped loudly, except under CI, where it fails."""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import pytest

ADMIN_URL = os.environ.get(
    "ENTRYWAY_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)


@asynccontextmanager
async def fresh_database(what: str) -> AsyncIterator[tuple[str, str]]:
    """(URL, name) of a new, empty database; `what` names the tier in the skip message."""
    try:
        admin = await asyncpg.connect(ADMIN_URL, timeout=5)
    except (OSError, asyncpg.PostgresError) as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"PostgreSQL unavailable at {ADMIN_URL} ({exc}): {what} SKIPPED")
    name = f"entryway_{secrets.token_hex(6)}"
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{ADMIN_URL.rsplit('/', 1)[0]}/{name}", name
    finally:
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        await admin.close()
