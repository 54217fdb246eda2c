"""A chain's bundler leader: a standby until it holds the chain's leader lock, then the
leader (`bundler.leader`). It runs as `entryway bundler --config FILE --chain N`, or inside
`entryway up` and `entryway serve` beside the API and the worker (`lead_in_process`).

One leader per (chain id, executor key set), elected by a PostgreSQL advisory lock held on a
connection of its own, or on SQLite by a lease row the leader renews (`storage.leader_lock`):
when the leader dies, so does its connection (or its lease runs out, at once for a dead
process of the same host), and a standby polling every LOCK_POLL_S takes over. The leader
follows the intake by polling it every INTAKE_POLL_S: a short indexed query, simpler than
LISTEN/NOTIFY (which needs a connection held outside the pool, re-listening after every
reconnect, and still a poll on takeover) and the same on SQLite. In one process with the API,
the API also wakes the leader as soon as it has written an op (`wake`), so that an op waits
for no poll; such a leader, with no op loaded, polls every IDLE_WOKEN_POLL_S only. A leader
that loses its lock stops at once, rather than bundle alongside a new leader: `entryway
bundler` exits (status 1) for its supervisor to restart it as a standby; an in-process
leader stands by again. With an operator endpoint (`--http-port`), it answers
/healthz, /readyz and /metrics from its `Leadership` (`composition.process_http`), standing
by and leading alike.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.bundler.executor_watch import ExecutorFunding, ExecutorWatch, watching
from entryway.bundler.leader import IntakeLeader
from entryway.bundler.service import Bundler
from entryway.bundler.standalone import StandaloneSettings, build_bundler
from entryway.bundler.states import BundlingMode
from entryway.bundler.validation.modes import parse_mode
from entryway.chain.rpc import EthClient, JsonRpcClient, RpcTransportError
from entryway.composition.process_http import bundler_probe, operator_endpoint
from entryway.errors import EntrywayError
from entryway.observability.operator_http import HttpAddress
from entryway.settings.checks import PreparedChain, database_url
from entryway.settings.commands import BundlerChain
from entryway.settings.model import Settings
from entryway.storage.engine import make_engine
from entryway.storage.intake import OpIntakeStore
from entryway.storage.leader_lock import LeaderLock, leader_key
from entryway.storage.outage import OutageLog
from entryway.waiting import woken

log = logging.getLogger("entryway.bundler.leader")
LOCK_POLL_S = 1.0
INTAKE_POLL_S = 0.05  # an indexed query of the open ops: 20 a second is cheap
# In one process with the API (`wake`), with no op loaded: the API wakes the leader for its
# own ops, so the poll only finds those of other processes sharing the database.
IDLE_WOKEN_POLL_S = 0.25


class LeadershipLostError(EntrywayError):
    """The leader lock's connection died: another process may be leading now."""


@dataclass
class Leadership:
    """What this bundler process is doing, as its operator endpoint reports it."""

    chain_id: int
    engine: AsyncEngine | None = None  # the database of the lock, once connected
    leading: bool = False
    bundler: Bundler | None = None  # the leader's, started, with its node client
    executors: ExecutorWatch | None = None  # the executor keys' balances, once watched

    @property
    def role(self) -> str:
        return "leader" if self.leading else "standby"


async def run_leader(
    database: str | AsyncEngine,
    chain_id: int,
    chain: BundlerChain,
    stop: asyncio.Event,
    *,
    on_leading: Callable[[], None] = lambda: None,
    leadership: Leadership | None = None,
    wake: asyncio.Event | None = None,
) -> None:
    """Stand by for the chain's leader lock in `database` (a URL, or the engine of this
    process's services), then bundle from the intake until `stop`; LeadershipLostError if
    the lock is lost while leading. `leadership` is kept up to date for the operator
    endpoint; `wake`, set by whoever wrote an op, ends the wait for the next poll early."""
    if not chain.executor_keys:
        raise EntrywayError(
            f"chains: chain {chain_id}'s bundler needs its executor keys (executor_key_files)"
        )
    own_engine = isinstance(database, str)
    engine = make_engine(database) if isinstance(database, str) else database
    leadership = leadership or Leadership(chain_id)
    leadership.engine = engine
    executors = [key.address for key in chain.executor_keys]
    lock = LeaderLock(engine, leader_key(chain_id, executors))
    try:
        log.info("chain %d: standing by for the bundler leader lock", chain_id)
        while not await lock.try_acquire():
            if await woken(stop, LOCK_POLL_S):
                return
        log.info("chain %d: leading, executors %s", chain_id, ", ".join(executors))
        leadership.leading = True
        on_leading()
        await _lead(lock, chain_id, chain, stop, leadership, wake)
    finally:
        leadership.leading, leadership.engine = False, None
        await lock.release()
        if own_engine:
            await engine.dispose()


async def _lead(
    lock: LeaderLock,
    chain_id: int,
    chain: BundlerChain,
    stop: asyncio.Event,
    leadership: Leadership,
    wake: asyncio.Event | None,
) -> None:
    async with JsonRpcClient(
        list(chain.rpc_urls),
        chain_id=chain_id,
        timeout=chain.rpc_timeout_s,
        trace_timeout=chain.rpc_trace_timeout_s,
        max_log_range=chain.rpc_max_log_range_blocks,
    ) as rpc:
        eth = EthClient(rpc)
        bundler_rpc = await build_bundler(
            eth,
            StandaloneSettings(
                rpc_url=chain.rpc_urls,
                entry_point=chain.entry_point,
                executor_keys=chain.executor_keys,
                mode=BundlingMode.AUTO,
                fee_rules=chain.fee_rules,
                block_gas_share_percent=chain.block_gas_share_percent,
                trusted_entities=chain.trusted_entities,
                validation_mode=parse_mode(chain.validation_mode),
                accountable_ops=True,  # the intake's ops came with API keys
            ),
        )
        bundler = bundler_rpc.bundler
        if bundler.config.chain_id != chain_id:
            raise EntrywayError(f"the node answers chain {bundler.config.chain_id}, not {chain_id}")
        # One leader per EntryPoint the chain carries, each bundling the intake's ops sent to it.
        intake = OpIntakeStore(lock.engine)
        leaders = [IntakeLeader(b, intake) for b in bundler_rpc.bundlers]
        await bundler_rpc.start()
        leadership.bundler = bundler
        outage = OutageLog(log, f"chain {chain_id}: the intake")
        try:
            while not stop.is_set():
                if not await lock.still_held():
                    raise LeadershipLostError(f"chain {chain_id}: lost the bundler leader lock")
                try:
                    await asyncio.gather(*(leader.step() for leader in leaders))
                except RpcTransportError as exc:
                    # Logged once per outage by the node client, not once per step.
                    log.debug("chain %d: the intake step waits for the node: %s", chain_id, exc)
                except Exception as exc:
                    if not outage.failed(exc):
                        log.exception("chain %d: the intake step failed; retrying", chain_id)
                else:
                    outage.answered()
                busy = any(leader.loaded for leader in leaders)
                await _next_poll(stop, wake, busy=busy)
        finally:
            leadership.bundler = None
            await bundler_rpc.stop()


async def _next_poll(stop: asyncio.Event, wake: asyncio.Event | None, *, busy: bool) -> None:
    """Wait INTAKE_POLL_S, or less: until `stop`, or until an op written here wakes us. Woken
    by this process's API and with no op loaded (not `busy`: none to write back), wait up to
    IDLE_WOKEN_POLL_S instead: an idle `entryway up` then reads the intake a few times a
    second rather than twenty times per EntryPoint."""
    if wake is None:
        await woken(stop, INTAKE_POLL_S)
        return
    timeout = INTAKE_POLL_S if busy else IDLE_WOKEN_POLL_S
    waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(wake.wait())]
    try:
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in waits:
            waiting.cancel()
    wake.clear()


def leader_chain(chain: PreparedChain) -> BundlerChain:
    """What the leader of a chain the services were built for bundles with: its node URLs,
    its executor keys, its EntryPoint and its fee rules."""
    return BundlerChain(
        tuple(chain.settings.urls()),
        chain.keys.executors,
        chain.deployment.entry_point,
        chain.settings.fee_rules_resolved,
        block_gas_share_percent=chain.settings.bundle_block_gas_share_percent,
        trusted_entities=tuple(chain.settings.trusted_entities) + chain.deployment.own_entities,
        validation_mode=chain.settings.validation_mode,
    )


async def lead_in_process(
    database: AsyncEngine | str,
    chain: PreparedChain,
    stop: asyncio.Event,
    *,
    wake: asyncio.Event | None = None,
    leadership: Leadership | None = None,
) -> None:
    """The leader of `chain` beside the API and the worker of this process (`entryway up`,
    `entryway serve`), on their database, until `stop`. A leader that loses its lock (or
    fails) stands by again, as a restarted `entryway bundler` would. `database`: an engine
    to share, or a URL for a pool of the leader's own."""
    chain_id = chain.settings.chain_id
    bundling = leader_chain(chain)
    while not stop.is_set():
        try:
            await run_leader(database, chain_id, bundling, stop, wake=wake, leadership=leadership)
        except LeadershipLostError as exc:
            log.warning("%s; standing by again", exc)
        except Exception:
            log.exception("chain %d: the bundler leader failed; standing by again", chain_id)
        await woken(stop, LOCK_POLL_S)


async def lead_until_signalled(
    settings: Settings, chain_id: int, chain: BundlerChain, http: HttpAddress | None = None
) -> None:
    """`run_leader` until SIGINT or SIGTERM; a JSON line on stdout once this process leads.
    With `http`, the operator endpoint is served there meanwhile."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    leadership = Leadership(chain_id)

    def leading() -> None:
        sys.stdout.write(json.dumps({"leading": chain_id}) + "\n")
        sys.stdout.flush()
        if leadership.executors is not None:
            leadership.executors.wake()  # the leader tops up: check now

    async with AsyncExitStack() as stack:
        await stack.enter_async_context(_watching_executors(chain_id, chain, leadership))
        if http is not None:
            probe = bundler_probe(settings, leadership)
            await stack.enter_async_context(operator_endpoint(probe, http))
        await run_leader(
            database_url(settings), chain_id, chain, stop, on_leading=leading, leadership=leadership
        )


@asynccontextmanager
async def _watching_executors(
    chain_id: int, chain: BundlerChain, leadership: Leadership
) -> AsyncIterator[None]:
    """The executor keys' balances watched (`bundler.executor_watch`), standing by and
    leading alike, on a node client of the watch's own; topped up while leading."""
    funding = ExecutorFunding(
        chain.executor_min_balance_wei, chain.executor_topup_wei, chain.executor_funding_key
    )
    async with JsonRpcClient(list(chain.rpc_urls), chain_id=chain_id) as rpc:
        executors = [key.address for key in chain.executor_keys]
        watch = ExecutorWatch(EthClient(rpc), chain_id, executors, funding)
        leadership.executors = watch
        try:
            async with watching(watch, lambda: leadership.leading):
                yield
        finally:
            leadership.executors = None
