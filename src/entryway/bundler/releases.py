"""The bundlers of a chain's other EntryPoint releases, made beside its main one: same node
client, executor keys and settings; their own mempool, reputation, simulation code and hash."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from entryway import contracts
from entryway.bundler.gas.estimation import GasEstimator
from entryway.bundler.gas.estimation_v06 import GasEstimatorV06
from entryway.bundler.gas.l1fee import L1FeeQuoter
from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.service import Bundler, BundlerConfig
from entryway.bundler.submission import TransactionManager
from entryway.bundler.validation.simulation import Simulator, Validator
from entryway.bundler.validation.simulation_v06 import (
    SimulatorV06,
    answers_as_v06,
    sender_creator_v06,
)
from entryway.chain.rpc import EthClient
from entryway.domain.entry_points import (
    RELEASES,
    V06,
    EntryPointRelease,
    EntryPointVersion,
    release,
    version_at,
)
from entryway.domain.evm import checksum, create_address
from entryway.errors import ConfigurationError

# How the bundler itself is made from its parts: `Bundler`, or one that hands ops on.
BundlerFactory = Callable[[EthClient, list[TransactionManager], Validator, BundlerConfig], Bundler]


async def sender_creator_of(eth: EthClient, entry_point: str) -> str:
    """The SenderCreator the EntryPoint made in its constructor (its first CREATE): v0.8
    names it (`senderCreator()`); v0.7 keeps it private, so its address is derived; v0.6's
    code holds it (simulation_v06.sender_creator_v06)."""
    version = version_at(entry_point)
    if version is EntryPointVersion.V06:
        return sender_creator_v06(entry_point, await eth.get_code(entry_point))
    if version is EntryPointVersion.V07:
        return create_address(entry_point, 1)
    abi = contracts.load(release(version).artifact("EntryPoint")).abi
    raw = await eth.call(entry_point, abi.encode_call("senderCreator"))
    return checksum(abi.decode_output("senderCreator", raw)[0])


def is_release_code(r: EntryPointRelease, address: str, code: bytes) -> bool:
    """Whether `code` at `address` is release `r`. At an address the package's creation code
    lands at, the runtime code must match the package's. At a canonical address the package
    does not reach (v0.9's: npm has only its release candidate), the deterministic deployer
    and the release's salt put only the release's own code there: any code is it."""
    if not code:
        return False
    if contracts.load(r.artifact("EntryPoint")).runtime_matches(code):
        return True
    return r.packaged_address is not None and address.lower() == r.address.lower()


async def check_entry_point_code(eth: EthClient, entry_point: str, chain_id: int) -> None:
    """The EntryPoint is there, and is the release its address stands for."""
    code = await eth.get_code(entry_point)
    if not code:
        raise ConfigurationError(f"no EntryPoint at {entry_point} on chain {chain_id}")
    if version_at(entry_point) is EntryPointVersion.V06:
        if not await answers_as_v06(eth, entry_point, chain_id):
            raise ConfigurationError(f"the code at {entry_point} is not EntryPoint v0.6")
        return
    r = release(version_at(entry_point))
    if not is_release_code(r, entry_point, code):
        raise ConfigurationError(f"the code at {entry_point} is not EntryPoint v{r.version}")


async def releases_present(eth: EthClient, besides: str) -> list[str]:
    """The EntryPoints, other than `besides`, that the chain carries: each release at its
    canonical address, else (v0.9 on a devnet) where its package's code lands."""
    found = []
    for r in RELEASES.values():
        for address in r.addresses:
            if address.lower() == besides.lower():
                break
            if is_release_code(r, address, await eth.get_code(address)):
                found.append(address)
                break
    if V06.address.lower() != besides.lower() and await answers_as_v06(
        eth, V06.address, await eth.chain_id()
    ):
        found.append(V06.address)
    return found


def simulator_for(eth: EthClient, entry_point: str) -> Simulator:
    if version_at(entry_point) is EntryPointVersion.V06:
        return SimulatorV06(eth, entry_point)
    return Simulator(eth, entry_point)


def estimator_for(
    eth: EthClient, entry_point: str, l1_fees: L1FeeQuoter | None
) -> GasEstimator | GasEstimatorV06:
    if version_at(entry_point) is EntryPointVersion.V06:
        return GasEstimatorV06(eth, entry_point, l1_fees)
    return GasEstimator(eth, entry_point, l1_fees)


async def add_entry_point(
    main: BundlerRpc, entry_point: str, *, make: BundlerFactory = Bundler
) -> BundlerRpc:
    """A bundler for `entry_point` on `main`'s chain, served by `main`'s RPC methods."""
    bundler = main.bundler
    eth = bundler.eth
    entry_point = checksum(entry_point)
    await check_entry_point_code(eth, entry_point, bundler.config.chain_id)
    rules = bundler.config.rules.for_version(version_at(entry_point))
    config = replace(bundler.config, entry_point=entry_point, rules=rules)
    validator = Validator(
        simulator_for(eth, entry_point),
        await sender_creator_of(eth, entry_point),
        config.rules,
        config.chain_id,
        mode=bundler.validator.mode,
    )
    validator.node_modes = bundler.validator.node_modes  # one node, one mode
    sibling = make(eth, bundler.executors, validator, config)
    sibling.head = bundler.head  # ops to either EntryPoint arriving together share a head read
    bundler.auto.join(sibling)  # each block's bundles, one per EntryPoint, built together
    rpc = BundlerRpc(sibling, estimator_for(eth, entry_point, sibling.l1_fees), debug=main.debug)
    main.serve_also(rpc)
    return rpc
