"""How a chain's UserOperations reach a bundler, chosen by its `bundling` setting.

`in_process` (the default, and `entryway up`'s): a bundler runs in every serving process,
with the chain's executor keys. `intake`: the process validates each op and writes it to the
durable intake in the database; the chain's elected `entryway bundler --chain N` leader
bundles it (`composition.leader`). No executor key is needed here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack

from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.bundler.intake import IntakeBundler
from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.service import Bundler, BundlerConfig
from entryway.bundler.standalone import StandaloneSettings, build_bundler
from entryway.bundler.states import BundlingMode
from entryway.bundler.submission import TransactionManager
from entryway.bundler.validation.simulation import Validator
from entryway.chain.rpc import EthClient
from entryway.settings.checks import PreparedChain
from entryway.storage.intake import OpIntakeStore

INTAKE = "intake"


SeamFn = Callable[[AsyncExitStack, EthClient, PreparedChain], Awaitable[BundlerRpc]]


def intake_bundler(engine: AsyncEngine) -> SeamFn:
    """The bundler seam (`composition.root.ChainBundler`) of a chain bundled from the
    intake: validation here, the op written to `engine`'s intake with its charge."""
    store = OpIntakeStore(engine)

    def make(
        eth: EthClient, executors: list[TransactionManager], validator: Validator, c: BundlerConfig
    ) -> Bundler:
        return IntakeBundler(eth, executors, validator, c, intake=store)

    async def seam(stack: AsyncExitStack, eth: EthClient, chain: PreparedChain) -> BundlerRpc:
        settings = StandaloneSettings(
            rpc_url=eth.rpc.url,
            entry_point=chain.deployment.entry_point,
            executor_keys=(),
            mode=BundlingMode.AUTO,  # judged as the leader will: against the base fee
            fee_rules=chain.settings.fee_rules_resolved,
        )
        return await build_bundler(eth, settings, make=make)  # never started: no loops

    return seam
