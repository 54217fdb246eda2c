"""Webhook secrets and the database at rest, on SQLite and PostgreSQL: signing secrets are
stored sealed (the raw row, and the SQLite file, hold no secret) and still sign; rows from
before sealing keep working and are sealed at start; a wrong key stops the start instead of
signing garbage; the SQLite file and its WAL are the service user's alone."""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.destinations import PRIVATE_ALLOWED
from entryway.domain.tasks import RetrySchedule
from entryway.domain.webhooks import EventType, new_secret, verify_webhook
from entryway.storage.engine import make_engine, migrate, sqlite_url
from entryway.storage.private_files import sqlite_path
from entryway.storage.schema import webhook_endpoints
from entryway.storage.secret_box import SecretBox, SecretsKeyError, key_id
from entryway.storage.webhook_log import DeliveryLog
from entryway.storage.webhook_secrets import seal_stored_secrets
from entryway.storage.webhooks import WebhookStore
from entryway.worker.delivery import DeliverySettings
from entryway.worker.main import WorkerSettings, run_worker, worker_for
from tests.integration.webhooks.support import SECRETS, Received, Receiver, new_project

WRONG = SecretBox(bytes(32))


@dataclass
class Rig:
    engine: AsyncEngine
    project_id: str
    receiver: Receiver

    def store(self, box: SecretBox = SECRETS) -> WebhookStore:
        return WebhookStore(self.engine, destinations=PRIVATE_ALLOWED, secrets=box)

    async def raw(self, endpoint_id: str) -> tuple[str, str | None]:
        async with self.engine.connect() as db:
            row = (
                await db.execute(
                    select(webhook_endpoints.c.secret, webhook_endpoints.c.previous_secret).where(
                        webhook_endpoints.c.endpoint_id == endpoint_id
                    )
                )
            ).one()
        return row.secret, row.previous_secret

    async def deliver(self, box: SecretBox = SECRETS) -> Received:
        """Emit one event and deliver it with a worker holding `box`; what arrived."""
        await self.store(box).emit(EventType.CREDITS_LOW, self.project_id, {"n": 1})
        delivery = DeliverySettings(schedule=RetrySchedule((60,)), destinations=PRIVATE_ALLOWED)
        settings = WorkerSettings(delivery=delivery)
        async with worker_for(self.engine, settings=settings, secrets=box) as worker:
            await worker.drain()
        return self.receiver.received[-1]


@pytest.fixture
async def rig(engine: AsyncEngine) -> AsyncIterator[Rig]:
    async with Receiver() as receiver:
        yield Rig(engine, await new_project(engine), receiver)


def verifies(request: Received, secret: str) -> bool:
    at = int(request.headers["webhook-timestamp"])
    return bool(verify_webhook(request.body, request.headers, secret, now=at))


def file_bytes(engine: AsyncEngine) -> bytes:
    """Everything SQLite wrote: the database file and its WAL (b"" for PostgreSQL)."""
    path = sqlite_path(engine.url.render_as_string(hide_password=False))
    if path is None:
        return b""
    files = [path, path.with_name(path.name + "-wal")]
    return b"".join(f.read_bytes() for f in files if f.exists())


async def test_signing_secrets_are_stored_sealed_and_still_sign(rig: Rig) -> None:
    created = await rig.store().create_endpoint(rig.project_id, rig.receiver.url, ["credits.low"])
    endpoint_id = created.endpoint.endpoint_id
    rotated = await rig.store().rotate_secret(rig.project_id, endpoint_id, timedelta(hours=1))
    assert rotated is not None
    secret, previous = await rig.raw(endpoint_id)
    assert previous is not None
    for stored in (secret, previous):
        assert stored.startswith(f"v1:{SECRETS.key_id}:")
        for shown in (created.secret, rotated.secret):
            assert shown.removeprefix("whsec_") not in stored
    written = file_bytes(rig.engine)
    for shown in (created.secret, rotated.secret):
        assert shown.removeprefix("whsec_").encode() not in written

    request = await rig.deliver()
    assert verifies(request, rotated.secret) and verifies(request, created.secret)


async def test_rows_from_before_sealing_keep_signing_and_are_sealed_at_start(rig: Rig) -> None:
    created = await rig.store().create_endpoint(rig.project_id, rig.receiver.url, ["credits.low"])
    endpoint_id = created.endpoint.endpoint_id
    legacy, legacy_previous = new_secret(), new_secret()
    async with rig.engine.begin() as db:  # as an older version wrote them: in clear
        await db.execute(
            update(webhook_endpoints)
            .where(webhook_endpoints.c.endpoint_id == endpoint_id)
            .values(
                secret=legacy,
                previous_secret=legacy_previous,
                previous_secret_expires_at=datetime.now(UTC) + timedelta(days=1),
            )
        )
    before = await rig.deliver()
    assert verifies(before, legacy) and verifies(before, legacy_previous)

    assert await seal_stored_secrets(rig.engine, SECRETS) == 1
    assert await seal_stored_secrets(rig.engine, SECRETS) == 0  # once is enough
    for stored in await rig.raw(endpoint_id):
        assert stored is not None and SECRETS.is_current(stored)
        assert legacy.removeprefix("whsec_") not in stored
    after = await rig.deliver()
    assert verifies(after, legacy) and verifies(after, legacy_previous)


async def test_a_rotated_secrets_key_reseals_what_the_previous_one_sealed(rig: Rig) -> None:
    created = await rig.store(WRONG).create_endpoint(
        rig.project_id, rig.receiver.url, ["credits.low"]
    )
    rotated_key = SecretBox(bytes(range(32)), previous=[bytes(32)])  # SECRETS' key, after WRONG
    assert await seal_stored_secrets(rig.engine, rotated_key) == 1
    secret, _ = await rig.raw(created.endpoint.endpoint_id)
    assert secret.startswith(f"v1:{SECRETS.key_id}:")
    assert verifies(await rig.deliver(SECRETS), created.secret)  # the old key is not needed


async def test_a_wrong_key_stops_the_start_and_signs_nothing(rig: Rig) -> None:
    created = await rig.store().create_endpoint(rig.project_id, rig.receiver.url, ["credits.low"])
    with pytest.raises(SecretsKeyError) as stopped:
        await seal_stored_secrets(rig.engine, WRONG)
    assert SECRETS.key_id in str(stopped.value) and WRONG.key_id in str(stopped.value)

    url = rig.engine.url.render_as_string(hide_password=False)
    with pytest.raises(SecretsKeyError):
        async with asyncio.timeout(30):
            await run_worker(url, secrets=WRONG, stop=asyncio.Event())

    emitted = await rig.store().emit(EventType.CREDITS_LOW, rig.project_id, {"n": 1})
    with pytest.raises(SecretsKeyError):
        await DeliveryLog(rig.engine, secrets=WRONG).target(emitted.deliveries[0].delivery_id)
    async with worker_for(rig.engine, secrets=WRONG) as worker:
        await worker.drain()
    assert rig.receiver.connections == 0
    secret, _ = await rig.raw(created.endpoint.endpoint_id)
    assert secret.startswith(f"v1:{key_id(bytes(range(32)))}:")  # left as it was


@pytest.fixture
def usual_umask() -> Iterator[None]:
    before = os.umask(0o022)
    yield
    os.umask(before)


def widen(directory: Path) -> None:
    for path in directory.iterdir():
        path.chmod(0o644)


def modes(directory: Path) -> dict[str, int]:
    return {p.name: stat.S_IMODE(p.stat().st_mode) for p in sorted(directory.iterdir())}


@pytest.mark.usefixtures("usual_umask")
async def test_the_sqlite_database_and_its_wal_are_0600(tmp_path: Path) -> None:
    engine = make_engine(sqlite_url(tmp_path))
    try:
        await migrate(engine)
        project_id = await new_project(engine)
        async with engine.connect():  # the WAL and its index exist while a connection is open
            assert modes(tmp_path) == {
                "entryway.sqlite3": 0o600,
                "entryway.sqlite3-shm": 0o600,
                "entryway.sqlite3-wal": 0o600,
            }
    finally:
        await engine.dispose()
    widen(tmp_path)  # as an older version left them
    engine = make_engine(sqlite_url(tmp_path))
    try:
        assert await WebhookStore(engine).endpoints(project_id) == []
        assert set(modes(tmp_path).values()) == {0o600}
    finally:
        await engine.dispose()
