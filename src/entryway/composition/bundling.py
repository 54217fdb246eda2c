"""How a chain's UserOperations reach its bundler: through the durable intake, always.

Every process that accepts ops (the API, the worker's recovery steps) validates each one and
writes it to the intake in the database, with its charge, before its hash is returned; the
chain's elected leader bundles it (`composition.leader`): in the same process under
`entryway up` and `entryway serve`, else an `entryway bundler --config FILE --chain N`
process. No executor key is needed where ops are only accepted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack

from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.bundler.intake import IntakeBundler
from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.service import Bundler, BundlerConfig
from entryway.bundler.standalone import StandaloneSettings, build_bundler
from entryway.bundler.states import BundlingMode
from entryway.bundler.submission import TransactionManager
from entryway.bundler.validation.modes import parse_mode
from entryway.bundler.validation.simulation import Validator
from entryway.chain.rpc import EthClient
from entryway.settings.checks import PreparedChain
from entryway.storage.intake import OpIntakeStore

SeamFn = Callable[[AsyncExitStack, EthClient, PreparedChain], Awaitable[BundlerRpc]]


def intake_bundler(engine: AsyncEngine, wake: asyncio.Event | None = None) -> SeamFn:
    """The bundler seam (`composition.root.ChainBundler`): validation here, the op written
    to `engine`'s intake with its charge; `wake` is set after each write (the leader of this
    process waits on it)."""
    store = OpIntakeStore(engine)
    written = wake.set if wake is not None else None

    def make(
        eth: EthClient, executors: list[TransactionManager], validator: Validator, c: BundlerConfig
    ) -> Bundler:
        return IntakeBundler(eth, executors, validator, c, intake=store, on_written=written)

    async def seam(stack: AsyncExitStack, eth: EthClient, chain: PreparedChain) -> BundlerRpc:
        settings = StandaloneSettings(
            rpc_url=eth.rpc.url,
            entry_point=chain.deployment.entry_point,
            executor_keys=(),
            mode=BundlingMode.AUTO,  # judged as the leader will: against the base fee
            validation_mode=parse_mode(chain.settings.validation_mode),
            accountable_ops=True,
            fee_rules=chain.settings.fee_rules_resolved,
            block_gas_share_percent=chain.settings.bundle_block_gas_share_percent,
            trusted_entities=tuple(chain.settings.trusted_entities) + chain.deployment.own_entities,
        )
        rpc = await build_bundler(eth, settings, make=make)  # never started: no loops
        for each in rpc.all_rpcs():  # but their heads may keep themselves fresh
            stack.push_async_callback(each.bundler.head.close)
        return rpc

    return seam
