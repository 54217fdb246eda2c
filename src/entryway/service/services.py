"""What the HTTP API serves from: the store, the ledger's companions (billing, metering,
rate limits, prices) and one bundler per chain. Built by the composition root (`entryway up`)
inside the server's lifespan, so nothing connects at import."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.service import Bundler
from entryway.chain.finality import Finality
from entryway.chain.rpc import EthClient
from entryway.deploy.deployer import Deployment
from entryway.domain.destinations import PUBLIC_ONLY, DestinationPolicy
from entryway.domain.evm import checksum
from entryway.domain.pricebook import PriceBook, default_price_book
from entryway.domain.support import ResponseTargets
from entryway.notary.service import Notary
from entryway.paymaster.deposit import DepositStatus, PaymasterDeposit
from entryway.paymaster.erc7677 import PaymasterRpc
from entryway.paymaster.settlement import SponsorshipSettler
from entryway.service.maintenance import ChainMaintenance
from entryway.service.metering import Meter
from entryway.service.ratelimit import RateLimiter
from entryway.service.request_log import RequestRecorder
from entryway.storage.billing import Billing
from entryway.storage.request_log import RequestLogRecords
from entryway.storage.secret_box import SecretBox
from entryway.storage.store import Store
from entryway.storage.usage import UsageQueries


class LeaderInProcess(Protocol):
    """The chain's bundler leader when it runs in this process (`entryway up`, `entryway
    serve`): its bundler while it leads, None while it stands by."""

    @property
    def bundler(self) -> Bundler | None: ...


@dataclass(frozen=True, slots=True)
class ChainRuntime:
    chain_id: int
    rpc_url: str
    deployment: Deployment
    rpc: BundlerRpc
    eth: EthClient
    leader: LeaderInProcess | None = None

    @property
    def bundling(self) -> Bundler:
        """The bundler whose executors, mempool and bundles this process reports: its own
        leader's while that leads here, else the accepting side's (no executor, no bundle)."""
        leading = self.leader.bundler if self.leader is not None else None
        return leading or self.rpc.bundler


@dataclass
class Platform:
    store: Store
    billing: Billing
    meter: Meter
    limiter: RateLimiter | None  # None: no rate limits (benchmarks, tests that want none)
    usage: UsageQueries


@dataclass
class Services:
    chains: dict[int, ChainRuntime] = field(default_factory=dict)
    prices: PriceBook = field(default_factory=default_price_book)
    maintenance: ChainMaintenance = field(default_factory=ChainMaintenance)  # chains closed now
    admin_token: str | None = None
    paymaster: PaymasterRpc | None = None  # ERC-7677 on /rpc/{chainId}
    settler: SponsorshipSettler | None = None  # settles the holds of sponsored ops
    # Each paymaster's latest deposit reading, by chain and EntryPoint (lower case): one
    # paymaster per EntryPoint release. Written by `record_deposit`, read by `deposits_on`.
    deposits: dict[tuple[int, str], DepositStatus] = field(default_factory=dict)
    finality: dict[int, Finality] = field(default_factory=dict)  # each followed chain's depths
    notary: Notary | None = None  # notarization intake; anchoring runs in the worker
    webhook_destinations: DestinationPolicy = PUBLIC_ONLY  # where endpoint URLs may point
    webhook_secrets: SecretBox | None = None  # seals signing secrets; None: none can be made
    support_targets: ResponseTargets = field(default_factory=ResponseTargets)  # by level
    request_log: RequestRecorder | None = None  # None: calls are not logged
    _platform: Platform | None = None

    @property
    def platform(self) -> Platform:
        if self._platform is None:
            raise RuntimeError("the service is not started")
        return self._platform

    @property
    def store(self) -> Store:
        return self.platform.store

    def paymaster_contracts(self, chain_id: int) -> dict[str, str]:
        """The service's paymaster at each EntryPoint of a chain this process runs, v0.8's
        first: EntryPoint -> paymaster; empty for a chain it does not run."""
        chain = self.chains.get(chain_id)
        if chain is None:
            return {}
        deployment = chain.deployment
        return {deployment.entry_point: deployment.paymaster, **deployment.other_paymasters()}

    def record_deposit(self, status: DepositStatus) -> None:
        self.deposits[(status.chain_id, status.entry_point.lower())] = status

    def deposits_on(self, chain_id: int) -> list[PaymasterDeposit]:
        """Each of the chain's paymasters (v0.8's first) with its latest deposit reading."""
        return [
            PaymasterDeposit(
                checksum(entry_point),
                checksum(paymaster),
                self.deposits.get((chain_id, entry_point.lower())),
            )
            for entry_point, paymaster in self.paymaster_contracts(chain_id).items()
        ]

    def attach(
        self,
        store: Store,
        *,
        billing: Billing | None = None,
        limiter: RateLimiter | None = None,
        metering: bool = True,
    ) -> Platform:
        billing = billing or Billing(store.engine)
        meter = Meter(store, billing, self.prices, enabled=metering)
        self._platform = Platform(store, billing, meter, limiter, UsageQueries(store.engine))
        if self.request_log is None:
            self.request_log = RequestRecorder(RequestLogRecords(store.engine))
        return self._platform
