"""The composition root: `build_services(settings)` builds what every process runs on.

`entryway up` (the devnet turned into settings), `entryway serve`, `entryway api` and
`entryway worker` all call it; each then runs its own loop over what it yields: the HTTP
server, the task worker. Every op any of them accepts goes through the durable intake
(`composition.bundling`); `up` and `serve` also run each chain's bundler leader here
(`lead=True`). Nothing here reads the environment (the settings loader did) and nothing
connects before it is called.
"""

from __future__ import annotations

import asyncio
import logging
import secrets as tokens
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.bundler.port import Receipt, receipt_of
from entryway.bundler.rpc_methods import BundlerRpc
from entryway.chain.finality import Finality
from entryway.chain.follower import BlockRef
from entryway.chain.following import ChainFollower
from entryway.chain.price_feed import NativePriceFeed
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.chain.transactor import Transactor
from entryway.composition.bundling import intake_bundler
from entryway.composition.events import (
    alert_events,
    deposit_events,
    dropped_events,
    op_events,
    reorged_events,
    unsent_events,
)
from entryway.composition.leader import Leadership, lead_in_process
from entryway.domain.notarization import NotarySettings
from entryway.domain.token_prices import NativeTokenPrices
from entryway.notary.anchor import Anchorer
from entryway.notary.anchoring import notary_handlers
from entryway.notary.batcher import running_batcher
from entryway.notary.service import Notary
from entryway.paymaster.chain_charges import PaymasterEventFollower
from entryway.paymaster.deposit import DepositWatcher
from entryway.paymaster.erc7677 import PaymasterChain, PaymasterRpc, PaymasterSettings
from entryway.paymaster.relay_accounting import op_usage_key
from entryway.paymaster.reorgs import SponsorshipReorgs
from entryway.paymaster.settlement import (
    GRACE_SECONDS,
    SETTLE_TASK,
    SettleHandler,
    SponsorshipSettler,
)
from entryway.service.limits import RequestLimits
from entryway.service.maintenance import ChainMaintenance
from entryway.service.ratelimit import DEFAULT_HEAVY_LIMITS, RateLimiter, parse_limits
from entryway.service.request_log import RequestRecorder
from entryway.service.services import ChainRuntime, Services
from entryway.service.support_overdue import watch_overdue_forever
from entryway.service.wallet_wiring import bundler_port, recovery_flows
from entryway.settings.checks import PreparedChain, checked, database_url
from entryway.settings.model import Settings
from entryway.settings.networks import register_networks
from entryway.storage.billing import Billing
from entryway.storage.engine import make_engine, migrate
from entryway.storage.maintenance import MaintenanceRecords
from entryway.storage.notary import NotaryStore
from entryway.storage.notary_reanchor import unanchor_in_blocks
from entryway.storage.policies import PolicyStore, SqlSponsorshipUsage
from entryway.storage.private_files import private_directory, write_private_file
from entryway.storage.request_log import RequestLogRecords
from entryway.storage.secret_box import SecretBox
from entryway.storage.store import Store
from entryway.storage.support import SupportRequests
from entryway.storage.tasks import TaskQueue
from entryway.storage.webhook_secrets import seal_stored_secrets
from entryway.storage.webhooks import WebhookStore
from entryway.wallets.tasks import wallet_task_handlers
from entryway.worker.worker import Handler

log = logging.getLogger(__name__)
DEPOSIT_CHECK_SECONDS = 30.0
CYCLE_CLOSE_SECONDS = 60.0
LEADER_STOP_S = 30.0


@dataclass
class Composed:
    """What `build_services` yields: the services, the database they share, the box that
    opens webhook secrets, and every task kind's handler (webhook deliveries excepted: the
    worker adds that one itself)."""

    services: Services
    engine: AsyncEngine
    secrets: SecretBox
    handlers: dict[str, Handler] = field(default_factory=dict)


@asynccontextmanager
async def build_services(
    settings: Settings,
    *,
    services: Services | None = None,
    chains: tuple[PreparedChain, ...] | None = None,
    serving: bool = True,
    migrate_schema: bool = False,
    bundler: ChainBundler | None = None,
    lead: bool = False,
) -> AsyncIterator[Composed]:
    """Build and start every service of `settings`; stop them all when the block ends.

    `chains`: already checked (`entryway.settings.checks.checked`); without them the start
    checks run here and StartCheckError stops the process before anything is served.
    `serving`: the loops that belong to a serving process (metering flushes, cycle closes,
    the settler's sweep, deposit watchers, notary batches); a worker process runs without.
    `services`: fill this instance (the one the HTTP app was created with).
    `bundler`: how each chain's UserOperations reach it (`ChainBundler`); default: the
    durable intake (`composition.bundling`).
    `lead`: also run each chain's bundler leader in this process, on the same database
    (`composition.leader.lead_in_process`), woken as soon as an op is written; without, the
    chain's `entryway bundler --chain N` processes bundle what this one accepts.
    """
    services = services if services is not None else Services()
    register_networks(settings.chains)  # before anything reads a chain's rules
    prepared = chains if chains is not None else await checked(settings)
    secrets = _secrets_box(settings, create=serving)
    async with AsyncExitStack() as stack:
        engine = make_engine(database_url(settings))
        stack.push_async_callback(engine.dispose)
        if migrate_schema:
            await migrate(engine)
        await seal_stored_secrets(engine, secrets)  # a wrong key stops the start here
        store = Store(engine, max_keys_per_project=settings.max_keys_per_project)
        services.prices = settings.price_book()
        redis = settings.redis_url.get_secret_value() if settings.redis_url else None
        limiter = RateLimiter(
            parse_limits(settings.rate_limits),
            redis,
            heavy_by_plan=parse_limits(settings.heavy_rate_limits, DEFAULT_HEAVY_LIMITS),
        )
        stack.push_async_callback(limiter.aclose)
        platform = services.attach(
            store, billing=Billing(engine, settings.billing.billing_config()), limiter=limiter
        )
        services.webhook_secrets = secrets
        services.webhook_destinations = settings.webhooks.destinations
        services.admin_token = _admin_token(settings)
        services.support_targets = settings.support.targets()
        services.maintenance = ChainMaintenance(
            (c.chain_id for c in settings.chains if c.maintenance), MaintenanceRecords(engine)
        )
        events = WebhookStore(engine)
        platform.meter.on_alert = alert_events(events)
        services.request_log = RequestRecorder(RequestLogRecords(engine), settings.request_log)
        if serving:
            await platform.meter.start()
            stack.push_async_callback(platform.meter.stop)
            stack.push_async_callback(services.request_log.close)
            _background(stack, services.request_log.run_forever())
            _background(stack, _close_cycles_forever(services))
            _background(
                stack, watch_overdue_forever(SupportRequests(engine), services.support_targets)
            )
        for chain in prepared:
            wake = asyncio.Event() if lead else None
            leadership = Leadership(chain.settings.chain_id) if lead else None
            seam = bundler or intake_bundler(engine, wake)
            runtime = await _chain_runtime(stack, chain, seam, leadership)
            if leadership is not None:
                _leader(stack, _leader_database(engine, settings), chain, wake, leadership)
            services.chains[chain.settings.chain_id] = runtime
            await _follow_price_feed(stack, services, chain, runtime.eth)
        settler = await _paymaster(stack, services, store, events, prepared, settings, serving)
        notary, notary_tasks = _notary(services, engine, events, prepared)
        if serving:
            await stack.enter_async_context(
                running_batcher(notary.store, services.chains, notary.settings)
            )
            await _follow_chains(stack, services, store, events, notary, prepared, settler)
        handlers: dict[str, Handler] = {
            **notary_tasks,
            **wallet_task_handlers(recovery_flows(services)),
            SETTLE_TASK: SettleHandler(settler),
        }
        yield Composed(services, engine, secrets, handlers)


def request_limits(settings: Settings) -> RequestLimits:
    """What one request may hold: the service's defaults, with the settings' over them."""
    return RequestLimits(**settings.limits.given())


# The bundler seam: given the process's exit stack (to stop what it starts), the chain's node
# client and its prepared settings, the port this process's use cases send UserOperations
# through (`composition.bundling.intake_bundler`).
ChainBundler = Callable[[AsyncExitStack, EthClient, PreparedChain], Awaitable[BundlerRpc]]


def _leader_database(engine: AsyncEngine, settings: Settings) -> AsyncEngine | str:
    """Where the leader of this process reads and writes the intake. PostgreSQL: a pool of
    its own from the URL, as an `entryway bundler` process has (sharing the API's, the
    leader and the requests would queue for each other's connections). SQLite: the
    services' engine, its one connection (a second connection in the process would make the
    API's read-then-write transactions fail whenever the leader commits in between)."""
    if engine.dialect.name == "postgresql":
        return database_url(settings)
    return engine


def _leader(
    stack: AsyncExitStack,
    database: AsyncEngine | str,
    chain: PreparedChain,
    wake: asyncio.Event | None,
    leadership: Leadership,
) -> None:
    """The chain's bundler leader in this process until the stack closes; it stops first
    (its bundles out, its lock released) while the database is still there."""
    stop = asyncio.Event()
    task = asyncio.ensure_future(
        lead_in_process(database, chain, stop, wake=wake, leadership=leadership)
    )

    async def stopped() -> None:
        stop.set()
        try:
            await asyncio.wait_for(task, LEADER_STOP_S)
        except TimeoutError:
            chain_id = chain.settings.chain_id
            log.warning("chain %d: the bundler leader did not stop in time", chain_id)

    stack.push_async_callback(stopped)


async def _chain_runtime(
    stack: AsyncExitStack,
    chain: PreparedChain,
    bundler: ChainBundler,
    leadership: Leadership | None,
) -> ChainRuntime:
    urls, chain_id = chain.settings.urls(), chain.settings.chain_id
    rpc = await stack.enter_async_context(
        JsonRpcClient(
            urls,
            chain_id=chain_id,
            timeout=chain.settings.rpc_timeout_s,
            trace_timeout=chain.settings.rpc_trace_timeout_s,
            max_log_range=chain.settings.rpc_max_log_range_blocks,
        )
    )
    eth = EthClient(rpc)
    port = await bundler(stack, eth, chain)
    return ChainRuntime(chain_id, rpc.url, chain.deployment, port, eth, leader=leadership)


async def _paymaster(
    stack: AsyncExitStack,
    services: Services,
    store: Store,
    events: WebhookStore,
    prepared: tuple[PreparedChain, ...],
    settings: Settings,
    serving: bool,
) -> SponsorshipSettler:
    """ERC-7677 on every chain with the configured signer (a key file or variable, never the
    database), the settler that turns holds into final charges, the deposit watchers (one
    per paymaster: each EntryPoint release has its own)."""
    chains = services.chains.values()
    signer = prepared[0].keys.paymaster_signer if prepared else None
    signatures = store.signatures
    if signer is not None:
        services.paymaster = PaymasterRpc(
            {
                c.chain_id: PaymasterChain.on(
                    c.eth,
                    c.chain_id,
                    c.deployment.entry_point,
                    c.deployment.paymaster,
                    also=c.deployment.other_paymasters(),
                )
                for c in chains
            },
            signer,
            PolicyStore(store.engine),
            SqlSponsorshipUsage(store.engine),
            store.ledger,
            services.prices,
            on_hold=services.platform.meter.alerts_may_be_due,  # holds may cross an alert
            settings=PaymasterSettings(validity_s=settings.paymaster.signature_validity_s),
            signatures=signatures,
        )
    window = services.paymaster.settings if services.paymaster else None
    settler = SponsorshipSettler(
        store.ledger,
        services.prices,
        {c.chain_id: bundler_port(c) for c in chains},
        on_settled=op_events(events),
        on_dropped=dropped_events(events),
        on_released_unsent=unsent_events(events),
        counted=services.platform.meter.counted,
        inclusions=store.ledger,
        signatures=signatures,
        unsent_after=timedelta(
            seconds=(window.validity_s + window.clock_skew_s if window else 0) + GRACE_SECONDS
        ),
    )
    services.settler = settler
    if serving:
        await settler.start()
        stack.push_async_callback(settler.stop)
        alert = deposit_events(store, events)
        threshold = settings.paymaster.deposit_alert_wei
        for c in chains:  # every paymaster: v0.8's and each other release's, at its EntryPoint
            for entry_point, pm in services.paymaster_contracts(c.chain_id).items():
                watcher = DepositWatcher(c.eth, c.chain_id, entry_point, pm, threshold, alert)
                _background(stack, _watch_deposit(services, watcher))
    return settler


def _notary(
    services: Services,
    engine: AsyncEngine,
    events: WebhookStore,
    prepared: tuple[PreparedChain, ...],
) -> tuple[Notary, dict[str, Handler]]:
    """Notarization: intake for every chain; anchoring from each chain's submitter key as
    durable tasks (the returned handlers), batches sealed by the batcher."""
    notaries = NotaryStore(engine)
    notary = services.notary = Notary(notaries, services.chains, NotarySettings())
    anchorers = {}
    for chain in prepared:
        runtime = services.chains[chain.settings.chain_id]
        transactor = Transactor(runtime.eth, chain.keys.notary_submitter, runtime.chain_id)
        anchorers[runtime.chain_id] = Anchorer(transactor, chain.deployment.notary)
    return notary, dict(notary_handlers(notaries, anchorers, events))


async def _follow_chains(
    stack: AsyncExitStack,
    services: Services,
    store: Store,
    events: WebhookStore,
    notary: Notary,
    prepared: tuple[PreparedChain, ...],
    settler: SponsorshipSettler,
) -> None:
    """A follower per chain (`chain.following`): the blocks a reorg removes reverse the
    sponsorships settled in them, re-anchor the notary batches anchored in them and send the
    ops the bundlers mined in them back to the mempool (`bundler.reorged`); each new head
    makes the settlements deep enough final (`chain.finality`), as receipts then say. And a
    paymaster event follower per chain (`paymaster.chain_charges`): every op our paymasters
    paid for is charged to the project given the signature, whoever submitted it."""
    sponsorships = SponsorshipReorgs(store.ledger, TaskQueue(store.engine), reorged_events(events))
    charges: dict[int, PaymasterEventFollower] = {}

    async def removed(chain_id: int, blocks: list[BlockRef]) -> None:
        numbers = [b.number for b in blocks]
        await sponsorships.removed(chain_id, numbers)
        if chain_id in charges:
            charges[chain_id].rewind(min(numbers))
        for batch in await unanchor_in_blocks(notary.store, chain_id, numbers):
            log.warning(
                "notary batch %s lost its anchor in block %d of chain %d; anchoring it again",
                batch.batch_id,
                batch.block_number,
                chain_id,
            )
        for bundler in services.chains[chain_id].rpc.bundlers:  # its ops mined there: again
            await bundler.blocks_removed(numbers)

    async def new_head(chain_id: int, head: BlockRef, finality: Finality) -> None:
        await store.ledger.finalize(chain_id, finality.final_up_to(head.number))

    for chain in prepared:
        runtime = services.chains[chain.settings.chain_id]
        follower = await ChainFollower.for_node(
            runtime.eth,
            runtime.chain_id,
            finality_depth=chain.settings.finality_depth,
            reorg_depth=chain.settings.reorg_depth,
            on_removed=removed,
            on_head=new_head,
        )
        services.finality[runtime.chain_id] = follower.finality
        for bundler in runtime.rpc.bundlers:  # receipts say `final` by the chain's depth
            bundler.receipts.finality = follower.finality
        _background(stack, follower.follow())
        if services.paymaster_contracts(runtime.chain_id):
            charges[runtime.chain_id] = paymaster_event_follower(
                services, store, runtime, settler, follower.finality.finality_depth
            )
            _background(stack, charges[runtime.chain_id].follow())


def paymaster_event_follower(
    services: Services,
    store: Store,
    runtime: ChainRuntime,
    settler: SponsorshipSettler,
    finality_depth: int,
) -> PaymasterEventFollower:
    """The chain's paymaster event follower: receipts read by the bundler of the event's
    EntryPoint, charges made by the settler, "sent here" judged by the op's relay charge."""
    by_entry_point = {b.config.entry_point.lower(): b for b in runtime.rpc.bundlers}

    async def receipt(log_entry: dict[str, object], head: int) -> Receipt | None:
        bundler = by_entry_point[str(log_entry["address"]).lower()]
        doc = await bundler.receipts.of_log(dict(log_entry), head, bundler.l1_fees)
        return None if doc is None else receipt_of(doc)

    async def sent_here(chain_id: int, project_id: str, user_op_hash: str) -> bool:
        return await store.ledger.owns(project_id, op_usage_key(chain_id, user_op_hash))

    return PaymasterEventFollower(
        runtime.eth,
        runtime.chain_id,
        {
            ep: pm
            for ep, pm in services.paymaster_contracts(runtime.chain_id).items()
            if ep.lower() in by_entry_point
        },
        store.signatures,
        receipt_of_log=receipt,
        charge=settler.charge,
        sent_here=sent_here,
        finality_depth=finality_depth,
    )


async def _follow_price_feed(
    stack: AsyncExitStack, services: Services, chain: PreparedChain, eth: EthClient
) -> None:
    """The chain's native token price from its feed, when it names one: read once now (the
    configured price stands if that fails), then refreshed in the background."""
    prices = services.prices.native_token_micro_eur
    if chain.settings.price_feed is None or not isinstance(prices, NativeTokenPrices):
        return
    feed = NativePriceFeed(
        chain.settings.chain_id,
        eth,
        chain.settings.price_feed,
        chain.settings.price_feed_max_age_s,
        prices,
    )
    await feed.refresh()
    _background(stack, feed.follow())


def _background(stack: AsyncExitStack, job: Awaitable[None]) -> None:
    task = asyncio.ensure_future(job)
    stack.callback(task.cancel)


async def _watch_deposit(services: Services, watcher: DepositWatcher) -> None:
    """Keep the paymaster's latest deposit reading for the operator (/v1/admin/paymaster,
    /metrics, /readyz, the dashboard); a fall under the threshold alerts once (log and
    webhooks) until it recovers."""
    while True:
        try:
            services.record_deposit(await watcher.check())
        except Exception:
            log.warning(
                "cannot read the deposit of paymaster %s on chain %d",
                watcher.paymaster, watcher.chain_id,
            )  # fmt: skip
        await asyncio.sleep(DEPOSIT_CHECK_SECONDS)


async def _close_cycles_forever(services: Services) -> None:
    """Close billing cycles as they end (invoices, plan changes, next month's grants); a
    project whose close fails does not hold up the others (`Billing.close_all_due`)."""
    billing = services.platform.billing
    while True:
        try:
            await billing.close_all_due(datetime.now(UTC))
        except Exception:
            log.exception("closing billing cycles failed; retrying in %.0f s", CYCLE_CLOSE_SECONDS)
        await asyncio.sleep(CYCLE_CLOSE_SECONDS)


def _secrets_box(settings: Settings, *, create: bool) -> SecretBox:
    """The configured key, else the data directory's (made there by a serving process)."""
    if create:
        private_directory(settings.data_dir)  # 0700: keys, tokens, SQLite live here
    return settings.secrets.source().box(settings.data_dir, create=create)


def _admin_token(settings: Settings) -> str:
    """The operator token for /v1/admin: configured, else made once and kept (0600) in the
    data directory."""
    if settings.admin_token is not None:
        return settings.admin_token.get_secret_value()
    path = settings.admin_token_file or settings.data_dir / "admin-token"
    if settings.admin_token_file is None and not path.exists():
        write_private_file(path, tokens.token_urlsafe(32) + "\n")
    return Path(path).read_text().strip()
