"""What the operator's network page shows for each chain this service runs: whether its RPC
answers and with which chain id, the bundler's executor balances, each paymaster's deposit
(one paymaster per EntryPoint release) as its watcher last read it, the validation mode its
node allows (and the ERC-7562 rules that mode leaves unchecked), and whether the chain is
under maintenance. Read when the page is opened, each probe bounded in time, so one dead node
does not hold the page."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass
from datetime import datetime

from entryway.bundler.validation.modes import ValidationMode, unchecked_by
from entryway.chain.rpc import RpcError, RpcTransportError
from entryway.dashboard.operations_pages import in_token
from entryway.domain.networks import NETWORKS, Network
from entryway.observability.redaction import public_url
from entryway.paymaster.deposit import PaymasterDeposit
from entryway.service.chainhealth import PROBE_TIMEOUT_SECONDS
from entryway.service.readiness_checks import ReadinessSettings
from entryway.service.services import ChainRuntime, Services

UNREADABLE = (TimeoutError, RpcTransportError, RpcError, OSError, ValueError)
# An executor under this cannot pay for bundles long: the readiness check's own floor.
EXECUTOR_MIN_WEI = ReadinessSettings().executor_min_wei


@dataclass(frozen=True, slots=True)
class ExecutorBalance:
    address: str
    balance_wei: int | None  # None: the node did not answer

    @property
    def low(self) -> bool:
        return self.balance_wei is not None and self.balance_wei < EXECUTOR_MIN_WEI


@dataclass(frozen=True, slots=True)
class ChainReport:
    chain_id: int
    network: Network | None
    rpc: str  # scheme, host and port only: hosted providers carry keys in the rest
    reported_chain_id: int | None  # None: the RPC did not answer
    executors: tuple[ExecutorBalance, ...]
    deposits: tuple[PaymasterDeposit, ...]  # v0.8's paymaster first, then the other releases'
    maintenance_reason: str | None  # None: open for operations
    maintenance_since: datetime | None
    maintenance_configured: bool  # marked in the settings: only the settings lift it
    validation_mode: ValidationMode  # how its bundler enforces ERC-7562 here
    unchecked_rules: tuple[str, ...]  # what that mode cannot see

    @property
    def reachable(self) -> bool:
        return self.reported_chain_id is not None

    @property
    def chain_id_matches(self) -> bool:
        return self.reported_chain_id == self.chain_id

    def in_token(self, wei: int) -> str:
        """`wei` in the chain's native token, as the project pages show deposits."""
        return in_token(wei, self.network)


async def _bounded(probe: Awaitable[int]) -> int | None:
    try:
        return await asyncio.wait_for(probe, PROBE_TIMEOUT_SECONDS)
    except UNREADABLE:
        return None


async def _report(services: Services, chain: ChainRuntime) -> ChainReport:
    executors = [e.address for e in chain.bundling.executors]  # its leader's, leading here
    reported, *balances = await asyncio.gather(
        _bounded(chain.eth.chain_id()),
        *(_bounded(chain.eth.get_balance(a)) for a in executors),
    )
    closed = await services.maintenance.window(chain.chain_id)
    return ChainReport(
        chain_id=chain.chain_id,
        network=NETWORKS.get(chain.chain_id),
        rpc=public_url(chain.rpc_url),
        reported_chain_id=reported,
        executors=tuple(ExecutorBalance(a, b) for a, b in zip(executors, balances, strict=True)),
        deposits=tuple(services.deposits_on(chain.chain_id)),
        maintenance_reason=None if closed is None else closed.reason,
        maintenance_since=None if closed is None else closed.since,
        maintenance_configured=chain.chain_id in services.maintenance.configured,
        validation_mode=chain.rpc.bundler.validator.mode,
        unchecked_rules=unchecked_by(chain.rpc.bundler.validator.mode),
    )


async def network_reports(services: Services) -> list[ChainReport]:
    """One report per chain this service runs, by chain id."""
    chains = [services.chains[c] for c in sorted(services.chains)]
    return list(await asyncio.gather(*(_report(services, c) for c in chains)))
