"""The metric families read from the running service when /metrics is scraped: each
chain's mempool, bundles and node failures (totals the bundler and node client keep), the
paymaster deposits last read, the credits this process charged, and the task queue."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from sqlalchemy.exc import SQLAlchemyError

from entryway.service.services import Services
from entryway.storage.tasks import TaskQueue

log = logging.getLogger(__name__)


async def scraped_families(services: Services) -> list[Metric]:
    families = _chain_families(services)
    try:
        platform = services.platform
    except RuntimeError:  # not started yet: no store, no meter
        return families
    credits = CounterMetricFamily(
        "entryway_credits_charged",
        "Credits charged by this process (its meter, relayed ops, settled sponsorships), "
        "by operation kind.",
        labels=("operation",),
    )
    for operation, amount in sorted(platform.meter.credits_charged.items()):
        credits.add_metric((operation,), amount)
    families.append(credits)
    try:
        families.extend(await _task_families(TaskQueue(platform.store.engine)))
    except (SQLAlchemyError, OSError):
        log.warning("metrics: the task queue could not be read", exc_info=True)
    return families


def _chain_families(services: Services) -> list[Metric]:
    mempool = GaugeMetricFamily(
        "entryway_mempool_ops", "UserOperations waiting in the mempool.", labels=("chain",)
    )
    bundles = CounterMetricFamily(
        "entryway_bundles_sent", "Bundle transactions sent.", labels=("chain",)
    )
    gas = CounterMetricFamily(
        "entryway_bundle_gas_used", "Gas used by the mined bundles.", labels=("chain",)
    )
    included = CounterMetricFamily(
        "entryway_userops_included",
        "UserOperations mined in a bundle, by outcome (succeeded or reverted).",
        labels=("chain", "outcome"),
    )
    dropped = CounterMetricFamily(
        "entryway_userops_dropped",
        "UserOperations that left the mempool without being mined (expired, failed a check "
        "before bundling, or their bundle was dropped).",
        labels=("chain",),
    )
    node = CounterMetricFamily(
        "entryway_node_rpc_failures",
        "Calls to a node endpoint that brought back no JSON-RPC answer.",
        labels=("chain",),
    )
    deposit = GaugeMetricFamily(
        "entryway_paymaster_deposit_wei",
        "The paymaster's deposit at the EntryPoint, as last read.",
        labels=("chain",),
    )
    for chain_id, chain in sorted(services.chains.items()):
        label = str(chain_id)
        bundler = chain.rpc.bundler
        counts = bundler.counts
        mempool.add_metric((label,), len(bundler.mempool))
        bundles.add_metric((label,), counts.bundles_sent)
        gas.add_metric((label,), counts.bundle_gas_used)
        included.add_metric((label, "succeeded"), counts.ops_included)
        included.add_metric((label, "reverted"), counts.ops_reverted)
        dropped.add_metric((label,), counts.ops_dropped)
        node.add_metric((label,), chain.eth.rpc.failures)
        status = services.deposits.get(chain_id)
        if status is not None:
            deposit.add_metric((label,), status.deposit_wei)
    return [mempool, bundles, gas, included, dropped, node, deposit]


async def _task_families(queue: TaskQueue) -> list[Metric]:
    depth = GaugeMetricFamily(
        "entryway_tasks",
        "Unfinished durable tasks, by kind and state (queued or running).",
        labels=("kind", "state"),
    )
    age = GaugeMetricFamily(
        "entryway_task_oldest_age_seconds",
        "How long the longest-waiting queued task has been due, by kind (0: none is due).",
        labels=("kind",),
    )
    now = datetime.now(UTC)
    for backlog in await queue.backlog():
        depth.add_metric((backlog.kind, "queued"), backlog.queued)
        depth.add_metric((backlog.kind, "running"), backlog.running)
        due = backlog.oldest_run_at
        age.add_metric((backlog.kind,), max((now - due).total_seconds(), 0.0) if due else 0.0)
    return [depth, age]
