"""The recovery use cases over the running service: its database, its chains, its bundler
and paymaster per chain, its webhooks. Built per use (cheap: no connection is opened here)."""

from __future__ import annotations

from entryway.service.services import Services
from entryway.storage.recoveries import RecoveryStore
from entryway.storage.webhooks import WebhookStore
from entryway.wallets.chain import SmartAccountChain
from entryway.wallets.recoveries import RecoveryFlow, RecoverySettings
from entryway.wallets.sponsored_ops import ServiceSponsoredOps


def recovery_flow(services: Services, settings: RecoverySettings | None = None) -> RecoveryFlow:
    engine = services.store.engine
    chains = {c.chain_id: (c.eth, c.deployment) for c in services.chains.values()}
    return RecoveryFlow(
        RecoveryStore(engine),
        SmartAccountChain(chains),
        ServiceSponsoredOps(services),
        WebhookStore(engine),
        settings=settings,
    )
