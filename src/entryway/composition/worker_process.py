"""`entryway worker --config FILE`: the task worker over the services the settings describe."""

from __future__ import annotations

import asyncio
import logging
from contextlib import AsyncExitStack

from entryway.composition.process_http import operator_endpoint, worker_probe
from entryway.composition.root import build_services
from entryway.observability.metrics import ServiceMetrics
from entryway.observability.operator_http import HttpAddress
from entryway.settings.checks import checked
from entryway.settings.model import Settings
from entryway.worker.main import running_worker, worker_settings

log = logging.getLogger("entryway.worker")


async def run_configured_worker(
    settings: Settings, stop: asyncio.Event | None = None, http: HttpAddress | None = None
) -> None:
    """Every task kind (webhook deliveries, notary anchoring, sponsorship settlement,
    recovery steps) until `stop`; the start checks first, the schema included. With `http`,
    the operator endpoint (/healthz, /readyz, /metrics) is served there meanwhile."""
    chains = await checked(settings, schema=True)
    metrics = ServiceMetrics()
    async with (
        build_services(settings, chains=chains, serving=False) as composed,
        running_worker(
            composed.engine,
            settings=worker_settings(settings),
            usage=composed.services.store,
            price_book=composed.services.prices,
            handlers=composed.handlers,
            secrets=composed.secrets,
            on_failure=metrics.webhook_delivery_failed,
        ),
        AsyncExitStack() as stack,
    ):
        if http is not None:
            probe = worker_probe(settings, composed, metrics)
            await stack.enter_async_context(operator_endpoint(probe, http))
        log.info("worker running every task kind: %s", ", ".join(sorted(composed.handlers)))
        await (stop or asyncio.Event()).wait()
