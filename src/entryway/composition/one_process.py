"""The one-process form (`entryway up`, `entryway serve`): the API's services, the task
worker and each chain's bundler leader in one process, over one database and its intake.

An op the API (or a recovery step of the worker) accepts is written to the intake before its
hash is returned and bundled by the leader, woken at once; killed and started again on the
same database, the process finds every accepted op in the intake and bundles what is still
open (`bundler.leader`), so none is lost with the process.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from entryway.composition.root import Composed, build_services
from entryway.errors import EntrywayError
from entryway.observability.metrics import ServiceMetrics
from entryway.service.services import Services
from entryway.settings.checks import PreparedChain
from entryway.settings.model import Settings
from entryway.worker.main import running_worker, worker_settings


def leaderless(chains: tuple[PreparedChain, ...]) -> list[str]:
    """The problems of chains this process cannot lead: each needs its executor keys."""
    return [
        f"chains: chain {c.settings.chain_id} has no executor_key_files; its bundler leader "
        "runs in this process and signs its bundles with them"
        for c in chains
        if not c.keys.executors
    ]


@asynccontextmanager
async def running_in_one_process(
    settings: Settings,
    services: Services,
    chains: tuple[PreparedChain, ...],
    *,
    worker: bool = True,
    metrics: ServiceMetrics | None = None,
) -> AsyncIterator[Composed]:
    """Build the services with each chain's leader, migrate the schema, and run the worker
    unless `worker` is False (tasks then go to `entryway worker` processes); `metrics`: the
    app's registry, where the worker counts its failed deliveries."""
    problems = leaderless(chains)
    if problems:
        raise EntrywayError("; ".join(problems))
    async with build_services(
        settings, services=services, chains=chains, migrate_schema=True, lead=True
    ) as composed:
        if not worker:
            yield composed
            return
        async with running_worker(
            composed.engine,
            settings=worker_settings(settings),
            usage=services.store,
            price_book=services.prices,
            handlers=composed.handlers,
            secrets=composed.secrets,
            on_failure=metrics.webhook_delivery_failed if metrics else None,
        ):
            yield composed
