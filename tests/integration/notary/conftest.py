"""The notarization service on a real devnet and a real database (SQLite and PostgreSQL):
the API in-process (httpx over ASGI) with the notary wired as `entryway up` wires it, the
batcher ticked and the worker drained by hand so each step is observable."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.chain.rpc import EthClient
from entryway.chain.transactor import Transactor
from entryway.devnet.devnet import Devnet
from entryway.domain.apikeys import KeyEnvironment
from entryway.domain.notarization import NotarySettings
from entryway.domain.plans import PlanName
from entryway.notary.anchor import Anchorer
from entryway.notary.anchoring import AnchorBatchHandler, notary_handlers
from entryway.notary.batcher import Batcher
from entryway.notary.service import Notary
from entryway.service.app import create_app
from entryway.service.routes_notary import notary_routes
from entryway.service.services import Services
from entryway.storage.notary import NotaryStore
from entryway.storage.schema import usage_events
from entryway.storage.store import Store
from entryway.storage.tasks import TaskQueue
from entryway.storage.webhooks import WebhookStore
from entryway.worker.worker import Worker
from tests.integration.conftest import CHAIN_ID
from tests.integration.storage.conftest import engine
from tests.integration.webhooks.support import SECRETS

__all__ = ["engine"]

SETTINGS = NotarySettings(batch_size=4, batch_interval=3600.0, max_document_bytes=4096, max_bulk=50)


@dataclass
class NotaryRig:
    client: httpx.AsyncClient
    services: Services
    notary: Notary
    store: NotaryStore
    batcher: Batcher
    worker: Worker
    handler: AnchorBatchHandler
    anchorer: Anchorer
    webhooks: WebhookStore
    project_id: str
    key: str

    def auth(self, key: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key or self.key}"}

    async def new_project(self, chains: tuple[int, ...] = (CHAIN_ID, 84532)) -> tuple[str, str]:
        store = self.services.store
        now = datetime.now(UTC)
        owner = await store.create_user(f"{now.timestamp()}-{os.urandom(4).hex()}@example.org", now)
        pid = await store.create_project(owner, "tenant", PlanName.FREE, list(chains), now)
        key = await store.issue_key(pid, KeyEnvironment.TEST, list(chains), now)
        return pid, key.secret

    async def charges(self, project_id: str | None = None) -> tuple[int, int]:
        """(usage events, credits) of notarization charges for the project."""
        query = select(func.count(), func.coalesce(func.sum(usage_events.c.credits), 0)).where(
            usage_events.c.project_id == (project_id or self.project_id),
            usage_events.c.operation == "notarization",
        )
        async with self.services.store.engine.connect() as db:
            count, credits = (await db.execute(query)).one()
        return int(count), int(credits)

    async def anchor_pending(self) -> int:
        """Seal what is due and run the anchoring tasks: the tasks run."""
        await self.batcher.tick()
        return await self.worker.drain()


@pytest.fixture(scope="session")
async def anchorer(devnet: Devnet, eth: EthClient) -> Anchorer:
    submitter = Transactor(eth, devnet.keys.notary_submitter, CHAIN_ID)
    return Anchorer(submitter, devnet.chains[0].deployment.notary)


@pytest.fixture
async def rig(engine: AsyncEngine, anchorer: Anchorer) -> AsyncIterator[NotaryRig]:
    services = Services()
    services.attach(Store(engine, auth_cache_seconds=0))
    queue = TaskQueue(engine)
    store = NotaryStore(engine, queue=queue)
    notary = Notary(store, [CHAIN_ID], SETTINGS)
    services.notary = notary  # type: ignore[attr-defined]  # what the lead's wiring adds
    webhooks = WebhookStore(engine, queue=queue, secrets=SECRETS)
    handlers = notary_handlers(store, {CHAIN_ID: anchorer}, webhooks)
    worker = Worker(queue, handlers, concurrency=1)
    app = create_app(services)
    app.include_router(notary_routes())
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://entryway.test") as client:
        rig = NotaryRig(
            client,
            services,
            notary,
            store,
            Batcher(store, [CHAIN_ID], SETTINGS),
            worker,
            next(iter(handlers.values())),
            anchorer,
            webhooks,
            "",
            "",
        )
        rig.project_id, rig.key = await rig.new_project()
        yield rig
