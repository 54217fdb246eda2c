"""What the processes that serve no API show their operator on `--http-port`: the bundler of
a chain bundled from the intake (leader or standby) and the task worker (docs/operations.md).

- bundler: /readyz passes while leading with its node answering the chain's id, or while
  standing by with the database answering, and in both roles while every executor key holds
  the floor (`chain.<id>.executors`); its body names the role. /metrics: the leader's
  bundler families (`service.metrics_scrape.bundler_families`),
  `entryway_bundler_leader{chain}`, 1 while leading, 0 while standing by, and the executor
  keys' balances (`bundler.executor_watch`).
- worker: /readyz passes while the database answers. /metrics: the families the API reads
  (its chains' bundlers and nodes, the credits it charged, the task queue) and its webhook
  delivery failures.

Both keep the API's access rule for /metrics (`service.scrape_access`)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING

from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.observability.metrics import ServiceMetrics
from entryway.observability.operator_http import HttpAddress, serving
from entryway.observability.readiness import Check, NotReadyError, Readiness
from entryway.observability.redaction import public_url
from entryway.service.http_connections import ConnectionLimits, server_options
from entryway.service.metrics_scrape import ChainBundler, bundler_families, scraped_families
from entryway.service.process_endpoint import ProcessProbe, process_app
from entryway.settings.model import Settings

if TYPE_CHECKING:
    from entryway.composition.leader import Leadership
    from entryway.composition.root import Composed

log = logging.getLogger("entryway.operations")
CACHE_S = 1.0  # a readiness run answers for this long: a takeover shows within a second


@asynccontextmanager
async def operator_endpoint(probe: ProcessProbe, address: HttpAddress) -> AsyncIterator[None]:
    # The API's default connection limits: these ports answer probes and scrapes only.
    options = server_options(ConnectionLimits())
    async with serving(process_app(probe), address, options) as bound:
        log.info("operator endpoint on http://%s (/healthz, /readyz, /metrics)", bound)
        yield


def bundler_probe(settings: Settings, leadership: Leadership) -> ProcessProbe:
    def checks() -> dict[str, Check]:
        found: dict[str, Check] = {"database": partial(_database, leadership.engine)}
        if leadership.leading:
            found[f"chain.{leadership.chain_id}.rpc"] = partial(_leaders_node, leadership)
        if leadership.executors is not None:
            found[f"chain.{leadership.chain_id}.executors"] = leadership.executors.readiness
        return found

    async def families() -> Sequence[Metric]:
        bundler = leadership.bundler
        led = (
            [ChainBundler(leadership.chain_id, bundler, bundler.eth, bundler.validator.mode)]
            if bundler
            else []
        )
        role = GaugeMetricFamily(
            "entryway_bundler_leader",
            "1 while this process leads the chain's bundling, 0 while it stands by.",
            labels=("chain",),
        )
        role.add_metric((str(leadership.chain_id),), 1 if leadership.leading else 0)
        watch = leadership.executors
        return [*bundler_families(led), role, *(watch.families() if watch else [])]

    def describe() -> Mapping[str, object]:
        return {"role": leadership.role, "chain": leadership.chain_id}

    return ProcessProbe(
        readiness=Readiness(checks, cache_s=CACHE_S),
        describe=describe,
        families=families,
        metrics=ServiceMetrics(),
        metrics_token=_metrics_token(settings),
        operator_token=configured_operator_token(settings),
    )


def worker_probe(settings: Settings, composed: Composed, metrics: ServiceMetrics) -> ProcessProbe:
    """`metrics`: where the worker counts its failed webhook deliveries."""

    async def families() -> Sequence[Metric]:
        return await scraped_families(composed.services)

    return ProcessProbe(
        readiness=Readiness(lambda: {"database": partial(_database, composed.engine)}),
        describe=lambda: {"role": "worker"},
        families=families,
        metrics=metrics,
        metrics_token=_metrics_token(settings),
        operator_token=composed.services.admin_token,
    )


def configured_operator_token(settings: Settings) -> str | None:
    """The operator token of the settings, or of the data directory's file if a serving
    process made it; never made here (a bundler keeps no data directory of its own)."""
    if settings.admin_token is not None:
        return settings.admin_token.get_secret_value()
    path = settings.admin_token_file or settings.data_dir / "admin-token"
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def _metrics_token(settings: Settings) -> str | None:
    token = settings.metrics_token
    return token.get_secret_value() if token is not None else None


async def _database(engine: AsyncEngine | None) -> str:
    if engine is None:
        raise NotReadyError("not connected yet")
    async with engine.connect() as db:
        await db.execute(text("SELECT 1"))
    return f"{engine.dialect.name} answered"


async def _leaders_node(leadership: Leadership) -> str:
    bundler = leadership.bundler
    if bundler is None:
        raise NotReadyError("the leader's bundler is starting")
    where = public_url(bundler.eth.rpc.url)
    answered = await bundler.eth.chain_id()
    if answered != leadership.chain_id:
        raise NotReadyError(f"{where} serves chain {answered}, not {leadership.chain_id}")
    return f"{where} serves chain {answered}"
