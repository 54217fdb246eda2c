"""The metric families read from the running service when /metrics is scraped: each
chain's mempool, bundles and node failures (totals the bundler and node client keep), the
paymaster deposits last read (a paymaster per EntryPoint release), the credits this process
charged and how it wrote its accepted ops, the task queue, and the support requests past
their response target.

`bundler_families` and `task_families` serve the other processes too: the bundler leader
of a chain bundled from the intake, the task workers (`composition.process_http`). The
bundling series of a chain come only from a process that bundles it: an API or worker in
front of the intake exports its node failures, not an idle mempool's zeros."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from sqlalchemy.exc import SQLAlchemyError

from entryway.bundler.intake import IntakeBundler
from entryway.bundler.service import Bundler
from entryway.chain.rpc import EthClient
from entryway.service.services import Services
from entryway.service.support_overdue import overdue_family, overdue_requests
from entryway.storage.ledger import AcceptedWrite
from entryway.storage.support import SupportRequests
from entryway.storage.tasks import TaskQueue

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ChainBundler:
    """A chain's bundler and the node client whose failures are the chain's. `bundler` is
    None where the chain is bundled elsewhere (from the intake, by its leader process):
    only the node client is counted here, the bundling series being the leader's."""

    chain_id: int
    bundler: Bundler | None
    eth: EthClient
    validation_mode: str | None = None  # the mode ops are validated in here, if any


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
    writes = CounterMetricFamily(
        "entryway_accepted_op_groups",
        "Groups of accepted ops this process wrote, by how: at_once (one statement, no lock), "
        "lot_drawn and charged_before (that statement refused, written again under the "
        "project's lock), under_lock (SQLite, or a group with a sponsored op).",
        labels=("write",),
    )
    for how in AcceptedWrite:
        writes.add_metric((how.value,), platform.store.ledger.accepted_writes[how])
    families.append(writes)
    try:
        families.extend(await task_families(TaskQueue(platform.store.engine)))
    except (SQLAlchemyError, OSError):
        log.warning("metrics: the task queue could not be read", exc_info=True)
    try:
        requests = SupportRequests(platform.store.engine)
        now = datetime.now(UTC)
        families.append(
            overdue_family(await overdue_requests(requests, services.support_targets, now))
        )
    except (SQLAlchemyError, OSError):
        log.warning("metrics: the support requests could not be read", exc_info=True)
    return families


def _chain_families(services: Services) -> list[Metric]:
    families = bundler_families(
        ChainBundler(
            chain_id, _bundling_here(chain.bundling), chain.eth, chain.rpc.bundler.validator.mode
        )
        for chain_id, chain in sorted(services.chains.items())
    )
    deposit = GaugeMetricFamily(
        "entryway_paymaster_deposit_wei",
        "Each paymaster's deposit at its EntryPoint (one per release), as last read.",
        labels=("chain", "entry_point", "paymaster"),
    )
    for chain_id in sorted(services.chains):
        for d in services.deposits_on(chain_id):
            if d.reading is not None:
                labels = (str(chain_id), d.entry_point, d.paymaster)
                deposit.add_metric(labels, d.reading.deposit_wei)
    return [*families, deposit]


def _bundling_here(bundler: Bundler) -> Bundler | None:
    """The chain's bundler if it bundles in this process (its leader, leading here); None
    for one that only validates ops for the intake (its mempool stays empty, its counts at
    zero: series that would read as a bundler that does nothing)."""
    return None if isinstance(bundler, IntakeBundler) else bundler


def bundler_families(chains: Iterable[ChainBundler]) -> list[Metric]:
    """Each chain's mempool, bundles, ops and node failures, as its bundlers (one per
    EntryPoint) counted them; only node failures for a chain bundled elsewhere."""
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
    reverted = CounterMetricFamily(
        "entryway_bundles_reverted",
        "Bundles mined reverted whole: an op's validation passed before sending and failed on "
        "chain (its op failed and is blamed; the others went back to the mempool).",
        labels=("chain",),
    )
    node = CounterMetricFamily(
        "entryway_node_rpc_failures",
        "Calls to a node endpoint that brought back no JSON-RPC answer.",
        labels=("chain",),
    )
    validation = GaugeMetricFamily(
        "entryway_bundler_validation_mode",
        "1 for the ERC-7562 validation mode ops are validated in on the chain (native, "
        "opcodes, calls or untraced: what its node can trace, or what the settings pin).",
        labels=("chain", "mode"),
    )
    for chain in chains:
        label = str(chain.chain_id)
        node.add_metric((label,), chain.eth.rpc.failures)
        if chain.validation_mode is not None:
            validation.add_metric((label, chain.validation_mode), 1)
        if chain.bundler is None:
            continue
        # The chain's EntryPoints' bundlers together (they share the chain's bundling loop).
        group = chain.bundler.auto.group
        counts = [b.counts for b in group]
        mempool.add_metric((label,), sum(len(b.mempool) for b in group))
        bundles.add_metric((label,), sum(c.bundles_sent for c in counts))
        gas.add_metric((label,), sum(c.bundle_gas_used for c in counts))
        included.add_metric((label, "succeeded"), sum(c.ops_included for c in counts))
        included.add_metric((label, "reverted"), sum(c.ops_reverted for c in counts))
        dropped.add_metric((label,), sum(c.ops_dropped for c in counts))
        reverted.add_metric((label,), sum(c.bundles_reverted for c in counts))
    bundling = [mempool, bundles, gas, included, dropped, reverted]
    return [*(f for f in bundling if f.samples), node, validation]


async def task_families(queue: TaskQueue) -> list[Metric]:
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
