"""The REST API in-process (httpx over ASGI) on a real database: SQLite and PostgreSQL via the
storage tier's `engine` fixture. No chains: chain-bound routes are tested against anvil and
the real `entryway up` process elsewhere."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.apikeys import KeyEnvironment, KeyRole
from entryway.domain.plans import PlanName
from entryway.service.app import create_app
from entryway.service.ratelimit import RateLimiter
from entryway.service.services import Services
from entryway.storage.store import Store
from tests.integration.storage.conftest import engine  # noqa: F401 - the fixture

ADMIN_TOKEN = "operator-secret-for-tests"


@dataclass
class Api:
    client: httpx.AsyncClient
    services: Services
    project_id: str
    key: str

    def auth(self, key: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key or self.key}"}

    async def new_project(
        self, plan: PlanName = PlanName.FREE, chains: tuple[int, ...] = (80002, 84532)
    ) -> tuple[str, str]:
        """A project and its first key, an admin key (as the operator's route makes it)."""
        store = self.services.store
        now = datetime.now(UTC)
        owner = await store.create_user(f"{now.timestamp()}-{id(self)}@example.org", now)
        pid = await store.create_project(owner, "tenant", plan, list(chains), now)
        key = await store.issue_key(pid, KeyEnvironment.TEST, list(chains), now, role=KeyRole.ADMIN)
        return pid, key.secret

    async def service_key(
        self, chains: tuple[int, ...] = (80002, 84532), project_id: str | None = None
    ) -> str:
        """A service key of the project (this API's own unless `project_id` says)."""
        now = datetime.now(UTC)
        key = await self.services.store.issue_key(
            project_id or self.project_id, KeyEnvironment.TEST, list(chains), now
        )
        return key.secret


async def make_api(
    engine: AsyncEngine,  # noqa: F811
    limiter: RateLimiter | None = None,
) -> AsyncIterator[Api]:
    services = Services(admin_token=ADMIN_TOKEN)
    services.attach(Store(engine, auth_cache_seconds=0), limiter=limiter)
    app = create_app(services)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://entryway.test") as client:
        api = Api(client, services, "", "")
        api.project_id, api.key = await api.new_project()
        yield api
    if limiter is not None:
        await limiter.aclose()


@pytest.fixture
async def api(engine: AsyncEngine) -> AsyncIterator[Api]:  # noqa: F811
    async for a in make_api(engine):
        yield a
