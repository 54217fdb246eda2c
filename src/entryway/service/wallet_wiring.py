"""The recovery use cases over the running service: its database, its chains, its bundler
and paymaster per chain (through `BundlerPort`), its webhooks. Built per use (cheap: no
connection is opened here)."""

from __future__ import annotations

from collections.abc import Callable

from entryway.bundler.port import InProcessBundler
from entryway.paymaster.relay_accounting import RelayAccounting
from entryway.service.services import ChainRuntime, Services
from entryway.storage.recoveries import RecoveryStore
from entryway.storage.webhooks import WebhookStore
from entryway.wallets.chain import SmartAccountChain
from entryway.wallets.recoveries import RecoveryFlow, RecoverySettings
from entryway.wallets.sponsored_ops import ServiceSponsoredOps, SponsoringChain


def bundler_port(chain: ChainRuntime) -> InProcessBundler:
    """The chain's bundler seam (the durable intake), as use cases call it."""
    others = [rpc.bundler for rpc in chain.rpc.siblings.values()]
    return InProcessBundler(chain.rpc.bundler, chain.rpc.estimator, others)


def sponsored_ops(services: Services) -> ServiceSponsoredOps:
    ledger = services.store.ledger
    meter = services.platform.meter
    return ServiceSponsoredOps(
        {c.chain_id: SponsoringChain(bundler_port(c), c.eth) for c in services.chains.values()},
        services.paymaster,
        ledger,
        RelayAccounting(
            ledger, services.prices, on_charged=meter.alerts_may_be_due, counted=meter.counted
        ),
        services.prices,
    )


def recovery_flow(services: Services, settings: RecoverySettings | None = None) -> RecoveryFlow:
    engine = services.store.engine
    chains = {c.chain_id: (c.eth, c.deployment) for c in services.chains.values()}
    return RecoveryFlow(
        RecoveryStore(engine),
        SmartAccountChain(chains),
        sponsored_ops(services),
        WebhookStore(engine),
        settings=settings,
    )


def recovery_flows(
    services: Services, settings: RecoverySettings | None = None
) -> Callable[[], RecoveryFlow]:
    """A factory for the worker's recovery handlers, read when a task runs (so the service
    may finish starting after the handlers are registered)."""
    return lambda: recovery_flow(services, settings)
