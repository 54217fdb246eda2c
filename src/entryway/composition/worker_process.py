"""`entryway worker --config FILE`: the task worker over the services the settings describe."""

from __future__ import annotations

import asyncio
import logging

from entryway.composition.root import build_services
from entryway.settings.checks import checked
from entryway.settings.model import Settings
from entryway.worker.main import running_worker, worker_settings

log = logging.getLogger("entryway.worker")


async def run_configured_worker(settings: Settings, stop: asyncio.Event | None = None) -> None:
    """Every task kind (webhook deliveries, notary anchoring, sponsorship settlement,
    recovery steps) until `stop`; the start checks first, the schema included."""
    chains = await checked(settings, schema=True)
    async with (
        build_services(settings, chains=chains, serving=False) as composed,
        running_worker(
            composed.engine,
            settings=worker_settings(settings),
            usage=composed.services.store,
            price_book=composed.services.prices,
            handlers=composed.handlers,
            secrets=composed.secrets,
        ),
    ):
        log.info("worker running every task kind: %s", ", ".join(sorted(composed.handlers)))
        await (stop or asyncio.Event()).wait()
