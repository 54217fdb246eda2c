"""The standalone bundler (`entryway bundler`) built from its settings; its HTTP app is
`service.bundler_app`'s."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path

from eth_account import Account
from eth_account.signers.local import LocalAccount

from entryway.bundler.bundling import BundleLimits, block_gas_share_percent
from entryway.bundler.releases import (
    BundlerFactory,
    add_entry_point,
    check_entry_point_code,
    estimator_for,
    releases_present,
    sender_creator_of,
    simulator_for,
)
from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.service import Bundler, BundlerConfig
from entryway.bundler.states import BundlingMode
from entryway.bundler.submission import TransactionManager
from entryway.bundler.validation.modes import (
    NodeModes,
    ValidationMode,
    choose_mode,
    describe,
    probe_modes,
)
from entryway.bundler.validation.rules import RuleSettings
from entryway.bundler.validation.sanity import SanityLimits
from entryway.bundler.validation.simulation import Validator
from entryway.chain.capabilities import probe_capabilities
from entryway.chain.rpc import EthClient
from entryway.chain.transactor import Transactor
from entryway.deploy.deployer import ContractDeployer, v09_entry_point_on
from entryway.deploy.entry_point_v06 import place_entry_point_v06
from entryway.deploy.plan import Operator, plan_deployment
from entryway.domain.entry_points import version_at
from entryway.domain.evm import checksum
from entryway.domain.networks import FeeRules, fee_rules_for
from entryway.errors import ConfigurationError

log = logging.getLogger("entryway.bundler")
NO_OPERATOR = "0x" + "00" * 20


def planned_factories() -> tuple[str, ...]:
    """The account factories `entryway deploy` puts at fixed addresses on every chain (their
    addresses depend on no operator key): trusted wherever they are deployed."""
    plan = plan_deployment(Operator(NO_OPERATOR, NO_OPERATOR, NO_OPERATOR))
    return (plan.account_factory.address, plan.simple_account_factory_v07.address)


@dataclass(frozen=True)
class StandaloneSettings:
    rpc_url: str | tuple[str, ...]  # several: failover, in this order
    entry_point: str
    executor_keys: tuple[LocalAccount, ...]
    debug_rpc: bool = False
    auto_bundle_interval_s: float = 1.0
    mode: BundlingMode = BundlingMode.AUTO
    # None: the strongest mode the node serves (`validation.modes`); pinned, a node that
    # cannot serve it stops the start.
    validation_mode: ValidationMode | None = None
    # Every op comes with an API key whose project answers for it (the service's intake):
    # the node may then choose `untraced` by itself. A standalone bundler runs untraced only
    # when pinned so.
    accountable_ops: bool = False
    min_stake_wei: int = 10**18
    min_unstake_delay_s: int = 86_400
    beneficiary: str | None = None
    deploy_entry_point: bool = False
    l1_fee_oracle: str | None = None  # default: the network's (OP-stack chains)
    fee_rules: FeeRules | None = None  # default: the network's (domain/networks.py)
    # The chain's other EntryPoints served beside `entry_point` (each release's bundler);
    # None: every canonical release the chain carries.
    also_entry_points: tuple[str, ...] | None = None
    # The share of the block gas limit per bundle (None: the chain's default, bundling.py).
    block_gas_share_percent: int | None = None
    # Never throttled by reputation (reputation.py); a configured chain's leader adds the
    # operator's own factories and paymasters (`settings.commands.bundler_chain`).
    trusted_entities: tuple[str, ...] = ()
    extra: dict[str, str] = field(default_factory=dict)


def read_executor_keys(files: list[Path]) -> tuple[LocalAccount, ...]:
    keys: list[LocalAccount] = []
    for path in files:
        try:
            lines = path.read_text().split()
        except OSError as exc:
            raise ConfigurationError(
                f"cannot read executor key file {path}: {exc.strerror}"
            ) from exc
        for line in lines:
            try:
                keys.append(Account.from_key(line.strip()))
            except (ValueError, TypeError):
                raise ConfigurationError(
                    f"{path} holds something that is not a private key"
                ) from None
    if not keys:
        raise ConfigurationError("give at least one executor key")
    return tuple(keys)


async def deploy_entry_points(eth: EthClient, key: LocalAccount, chain_id: int) -> None:
    """Every EntryPoint release (v0.8, v0.7, v0.9) the chain lacks, at its canonical address
    (v0.9's release candidate where it lands, on a chain without the release); and v0.6, on
    a development node that lets code be set (anvil), placed as devnets place it."""
    deployer = ContractDeployer(eth, Transactor(eth, key, chain_id))
    plan = plan_deployment(
        Operator(key.address, key.address, key.address),
        entry_point_v09=await v09_entry_point_on(eth),
    )
    await deployer.ensure_deterministic_deployer()
    for entry_point in (plan.entry_point, plan.entry_point_v07, plan.entry_point_v09):
        await deployer.ensure(entry_point)
    # Only anvil lets code be set; elsewhere a copy of the npm release would be gas spent on
    # code the canonical address never runs.
    client = str(await eth.rpc.request("web3_clientVersion", []))
    if client.lower().startswith("anvil"):
        await place_entry_point_v06(eth.rpc, deployer)
    else:
        log.info("EntryPoint v0.6 not placed: %s is not anvil", client)


async def node_validation_mode(
    eth: EthClient, settings: StandaloneSettings, chain_id: int
) -> ValidationMode:
    """The validation mode the chain runs in: the strongest its node serves, or the pinned
    one; logged at every start with what it leaves unchecked, beside what else the node
    serves (`chain.capabilities`). A node without state overrides on eth_call cannot
    simulate an op: the start stops, saying so."""
    where = f"chain {chain_id}"
    tracing, serves = await asyncio.gather(probe_modes(eth.rpc), probe_capabilities(eth))
    if not serves.simulates:
        raise ConfigurationError(f"{where}: the node {serves.lines()[0]}")
    for line in serves.lines():
        (log.info if line.split(": ", 1)[1].startswith("yes") else log.warning)(
            "%s: node %s", where, line
        )
    mode = choose_mode(tracing, settings.validation_mode, where=where)
    chosen = mode is ValidationMode.UNTRACED and settings.validation_mode is None
    if chosen and not settings.accountable_ops:
        raise ConfigurationError(
            f"{where}: the node serves no tracer the bundler can judge ERC-7562 by (no "
            "debug_traceCall with erc7562Tracer, the struct logger, or callTracer and "
            "prestateTracer); to bundle anyway, with the EntryPoint's own checks alone, "
            "pin --validation-mode untraced"
        )
    if mode.complete:
        log.info("%s: validation mode %s", where, describe(mode))
    else:
        log.warning("%s: validation mode %s", where, describe(mode))
    return mode


async def build_bundler(
    eth: EthClient, settings: StandaloneSettings, *, make: BundlerFactory = Bundler
) -> BundlerRpc:
    chain_id = await eth.chain_id()
    entry_point = checksum(settings.entry_point)
    if settings.deploy_entry_point:
        await deploy_entry_points(eth, settings.executor_keys[0], chain_id)
    await check_entry_point_code(eth, entry_point, chain_id)
    validation_mode = await node_validation_mode(eth, settings, chain_id)
    sender_creator = await sender_creator_of(eth, entry_point)
    fee_rules = settings.fee_rules or fee_rules_for(chain_id)
    min_priority = fee_rules.min_priority_fee_per_gas
    oracle = settings.l1_fee_oracle or fee_rules.l1_gas_price_oracle
    if oracle is not None and not await eth.get_code(oracle):
        log.warning(
            "no L1 gas price oracle at %s on chain %d: L1 fees not charged", oracle, chain_id
        )
        oracle = None
    rules = RuleSettings(
        min_stake_wei=settings.min_stake_wei, min_unstake_delay_s=settings.min_unstake_delay_s
    ).for_version(version_at(entry_point))
    config = BundlerConfig(
        entry_point=entry_point,
        chain_id=chain_id,
        beneficiary=settings.beneficiary,
        mode=settings.mode,
        auto_bundle_interval_s=settings.auto_bundle_interval_s,
        rules=rules,
        min_priority_fee_per_gas=min_priority,
        sanity=SanityLimits.for_chain(chain_id),
        l1_fee_oracle=oracle,
        bundle=BundleLimits(
            block_gas_share_percent=block_gas_share_percent(
                chain_id, settings.block_gas_share_percent
            )
        ),
        trusted_entities=settings.trusted_entities,
    )
    validator = Validator(
        simulator_for(eth, entry_point), sender_creator, rules, chain_id, mode=validation_mode
    )
    validator.node_modes = NodeModes(
        eth.rpc,
        validation_mode,
        settings.validation_mode,
        accountable_ops=settings.accountable_ops,
        where=f"chain {chain_id}",
    )
    executors = [TransactionManager(eth, key, chain_id) for key in settings.executor_keys]
    bundler = make(eth, executors, validator, config)
    estimator = estimator_for(eth, entry_point, bundler.l1_fees)
    rpc = BundlerRpc(bundler, estimator, debug=settings.debug_rpc)
    others = settings.also_entry_points
    if others is None:
        others = tuple(await releases_present(eth, besides=entry_point))
    for other in others:
        await add_entry_point(rpc, other, make=make)
    return rpc
