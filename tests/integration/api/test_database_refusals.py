"""PostgreSQL answering and able to carry out nothing for now: out of connections for the
service's role, or read-only (the standby a client still reaches after a failover). Real
PostgreSQL, no stand-in: what the driver raises is an outage (`storage.outage`), so the API
answers 503 with Retry-After, as for a database it cannot reach, never a 500; reads still
answer while only writes are refused, and writes go through again once the server takes
them."""

from __future__ import annotations

import secrets

import asyncpg
import pytest
from sqlalchemy import text

from entryway.storage.engine import make_engine, migrate
from entryway.storage.outage import database_unavailable
from tests.integration.api.conftest import make_api
from tests.integration.postgres import ADMIN_URL, fresh_database


async def test_a_role_out_of_connections_is_an_outage() -> None:
    async with fresh_database("PostgreSQL out of connections") as (url, _):
        role = f"entryway_full_{secrets.token_hex(4)}"
        admin = await asyncpg.connect(ADMIN_URL)
        await admin.execute(f'CREATE ROLE "{role}" LOGIN CONNECTION LIMIT 0')
        engine = make_engine(url.replace("://postgres@", f"://{role}@", 1))
        try:
            with pytest.raises(Exception) as raised:
                async with engine.connect() as db:
                    await db.execute(text("SELECT 1"))
            assert "too many connections" in str(raised.value)
            assert database_unavailable(raised.value)
        finally:
            await engine.dispose()
            await admin.execute(f'DROP ROLE "{role}"')
            await admin.close()


async def test_a_read_only_database_answers_writes_503_and_reads_as_before() -> None:
    async with fresh_database("read-only PostgreSQL") as (url, name):
        engine = make_engine(url)
        await migrate(engine)
        admin = await asyncpg.connect(ADMIN_URL)
        try:
            async for api in make_api(engine):
                body = {"chains": [80002]}
                made = await api.client.post("/v1/keys", json=body, headers=api.auth())
                assert made.status_code == 201, made.text

                await admin.execute(
                    f'ALTER DATABASE "{name}" SET default_transaction_read_only = on'
                )
                await engine.dispose()  # the pool's next sessions start read-only
                read = await api.client.get("/v1/project", headers=api.auth())
                assert read.status_code == 200, read.text
                refused = await api.client.post("/v1/keys", json=body, headers=api.auth())
                assert refused.status_code == 503, refused.text
                assert refused.headers["Retry-After"] == "2"
                assert refused.json()["code"] == "service_unavailable"

                await admin.execute(f'ALTER DATABASE "{name}" RESET default_transaction_read_only')
                await engine.dispose()
                again = await api.client.post("/v1/keys", json=body, headers=api.auth())
                assert again.status_code == 201, again.text
        finally:
            await engine.dispose()
            await admin.close()
