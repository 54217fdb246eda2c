"""The embedded default (`entryway up`): devnets with every contract, SQLite (or the
database ENTRYWAY_DATABASE_URL names), a bundler per chain, a demo project and key."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.bundler.standalone import StandaloneSettings, build_bundler
from entryway.bundler.states import BundlingMode
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.chain.transactor import Transactor
from entryway.devnet.devnet import Devnet
from entryway.domain.apikeys import InvalidApiKeyError, KeyEnvironment
from entryway.domain.notarization import NotarySettings
from entryway.domain.plans import PlanName
from entryway.domain.webhooks import EventType
from entryway.notary.anchor import Anchorer
from entryway.notary.anchoring import notary_handlers
from entryway.notary.batcher import running_batcher
from entryway.notary.service import Notary
from entryway.paymaster.deposit import DepositAlert, DepositStatus, DepositWatcher
from entryway.paymaster.erc7677 import PaymasterChain, PaymasterRpc
from entryway.paymaster.settlement import (
    GRACE_SECONDS,
    SETTLE_TASK,
    ChainLookups,
    Settled,
    SettleHandler,
    SponsoredOp,
    SponsorshipSettler,
)
from entryway.paymaster.signer import PaymasterSigner
from entryway.service.metering import AlertHook
from entryway.service.ratelimit import RateLimiter, parse_limits
from entryway.service.services import ChainRuntime, Services
from entryway.storage.engine import make_engine, migrate, sqlite_url
from entryway.storage.notary import NotaryStore
from entryway.storage.policies import PolicyStore, SqlSponsorshipUsage
from entryway.storage.store import Store
from entryway.storage.webhooks import WebhookStore
from entryway.wallets.tasks import wallet_task_handlers
from entryway.worker import Handler, running_worker

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EmbeddedSettings:
    data_dir: Path
    chains: Sequence[int]
    devnet_base_port: int = 8545
    database_url: str | None = None
    redis_url: str | None = None  # shared rate limits; in memory without
    rate_limits: str = ""  # e.g. "FREE=10/second" over the defaults
    admin_token: str | None = None  # None: read or make <data-dir>/admin-token
    deposit_alert_wei: int = 10**17  # paymaster deposit under which operators are alerted
    worker: bool = True  # False: durable tasks wait for `entryway worker` processes


@asynccontextmanager
async def run_embedded(
    settings: EmbeddedSettings, services: Services
) -> AsyncIterator[dict[str, Any]]:
    """Start everything, fill `services`, yield the demo credentials; stop it all after."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    async with AsyncExitStack() as stack:
        devnet = await stack.enter_async_context(
            Devnet(settings.data_dir, list(settings.chains), base_port=settings.devnet_base_port)
        )
        engine = make_engine(settings.database_url or sqlite_url(settings.data_dir))
        stack.push_async_callback(engine.dispose)
        await migrate(engine)
        store = Store(engine)
        limiter = RateLimiter(parse_limits(settings.rate_limits), settings.redis_url)
        stack.push_async_callback(limiter.aclose)
        platform = services.attach(store, limiter=limiter)
        services.admin_token = settings.admin_token or _admin_token(settings.data_dir)
        await platform.meter.start()
        stack.push_async_callback(platform.meter.stop)
        closer = asyncio.create_task(_close_cycles_forever(services))
        stack.callback(closer.cancel)
        for chain in devnet.chains:
            client = await stack.enter_async_context(JsonRpcClient(chain.rpc_url))
            rpc = await build_bundler(
                EthClient(client),
                StandaloneSettings(
                    rpc_url=chain.rpc_url,
                    entry_point=chain.deployment.entry_point,
                    executor_keys=(devnet.keys.bundler_executor,),
                    mode=BundlingMode.AUTO,
                ),
            )
            await rpc.bundler.start()
            stack.push_async_callback(rpc.bundler.stop)
            services.chains[chain.chain_id] = ChainRuntime(
                chain.chain_id, chain.rpc_url, chain.deployment, rpc, EthClient(client)
            )
        events = WebhookStore(engine)
        platform.meter.on_alert = _alert_events(events)
        settler = await _start_paymaster(
            stack, services, store, devnet, events, settings.deposit_alert_wei
        )
        notary, notary_handlers = _start_notary(services, devnet, engine, events)
        handlers: dict[str, Handler] = {
            **notary_handlers,
            **wallet_task_handlers(services),
            SETTLE_TASK: SettleHandler(settler),
        }
        if settings.worker:
            await stack.enter_async_context(
                running_worker(engine, usage=store, price_book=services.prices, handlers=handlers)
            )
        await stack.enter_async_context(
            running_batcher(notary.store, services.chains, notary.settings)
        )
        demo = await _demo_project(store, settings.data_dir / "demo.json", services)
        yield demo


async def _demo_project(store: Store, path: Path, services: Services) -> dict[str, Any]:
    """A FREE project on the devnet chains with its key, made once and kept in demo.json."""
    chains = sorted(services.chains)
    saved = _read(path)
    if saved is not None:
        try:
            await store.authenticate(saved["apiKey"])
        except (InvalidApiKeyError, KeyError):
            pass  # a new database: make the demo again
        else:
            demo: dict[str, Any] = {**saved, "chains": _chains_json(services)}  # ports may move
            _write(path, demo)
            return demo
    now = datetime.now(UTC)
    owner = await store.create_user(f"demo-{now.timestamp()}@entryway.local", now)
    project_id = await store.create_project(owner, "Demo", PlanName.FREE, chains, now)
    key = await store.issue_key(project_id, KeyEnvironment.TEST, chains, now)
    demo = {"apiKey": key.secret, "projectId": project_id, "chains": _chains_json(services)}
    _write(path, demo)
    return demo


def _start_notary(
    services: Services, devnet: Devnet, engine: AsyncEngine, events: WebhookStore
) -> tuple[Notary, dict[str, Handler]]:
    """Notarization: intake for every chain, anchoring from the notary key as durable tasks
    (the returned worker handlers), batches sealed by the batcher."""
    notaries = NotaryStore(engine)
    settings = NotarySettings()
    notary = services.notary = Notary(notaries, services.chains, settings)
    anchorers = {
        c.chain_id: Anchorer(
            Transactor(c.eth, devnet.keys.notary_submitter, c.chain_id), c.deployment.notary
        )
        for c in services.chains.values()
    }
    return notary, dict(notary_handlers(notaries, anchorers, events))


def _alert_events(events: WebhookStore) -> AlertHook:
    """Credit alerts (once per cycle each) become webhook events."""

    async def emit(project_id: str, kind: str, data: dict[str, object]) -> None:
        await events.emit(EventType(kind), project_id, data)

    return emit


def _op_events(events: WebhookStore) -> Settled:
    """A sponsored op's receipt becomes userop.included or userop.failed."""

    async def emit(sponsored: SponsoredOp, receipt: dict[str, Any]) -> None:
        kind = EventType.USEROP_INCLUDED if receipt["success"] else EventType.USEROP_FAILED
        data = {
            "chainId": sponsored.chain_id,
            "userOpHash": sponsored.user_op_hash,
            "sender": sponsored.op.sender,
            "transactionHash": receipt["receipt"]["transactionHash"],
            "actualGasCost": receipt["actualGasCost"],
            "reason": receipt.get("reason"),
        }
        key = f"{kind.value}:{sponsored.chain_id}:{sponsored.user_op_hash}"
        await events.emit(kind, sponsored.project_id, data, idempotency_key=key)

    return emit


async def _start_paymaster(
    stack: AsyncExitStack,
    services: Services,
    store: Store,
    devnet: Devnet,
    events: WebhookStore,
    deposit_alert_wei: int,
) -> SponsorshipSettler:
    """ERC-7677 on every chain with the devnet's paymaster signer (a key file in the data
    directory, never the database), the settler that turns holds into final charges, and the
    deposit watchers."""
    chains = services.chains.values()
    services.paymaster = PaymasterRpc(
        {
            c.chain_id: PaymasterChain.on(
                c.eth, c.chain_id, c.deployment.entry_point, c.deployment.paymaster
            )
            for c in chains
        },
        PaymasterSigner(devnet.keys.paymaster_signer),
        PolicyStore(store.engine),
        SqlSponsorshipUsage(store.engine),
        store.ledger,
        services.prices,
    )
    settler = SponsorshipSettler(
        store.ledger,
        services.prices,
        {
            c.chain_id: ChainLookups(
                receipt=_bound(c.rpc.get_user_operation_receipt), status=_bound(c.rpc.op_status)
            )
            for c in chains
        },
        on_settled=_op_events(events),
        unsent_after=timedelta(
            seconds=services.paymaster.settings.validity_s
            + services.paymaster.settings.clock_skew_s
            + GRACE_SECONDS
        ),
    )
    services.settler = settler
    await settler.start()
    stack.push_async_callback(settler.stop)
    for c in chains:
        watcher = DepositWatcher(
            c.eth,
            c.chain_id,
            c.deployment.entry_point,
            c.deployment.paymaster,
            deposit_alert_wei,
            _deposit_events(store, events),
        )
        task = asyncio.create_task(_watch_deposit(services, watcher))
        stack.callback(task.cancel)
    return settler


DEPOSIT_CHECK_SECONDS = 30.0


async def _watch_deposit(services: Services, watcher: DepositWatcher) -> None:
    """Keep the deposit's latest reading for the operator (/v1/admin/paymaster); a fall under
    the threshold alerts once (log and webhooks) until it recovers."""
    while True:
        try:
            services.deposits[watcher.chain_id] = await watcher.check()
        except Exception:
            log.warning("cannot read the paymaster deposit on chain %d", watcher.chain_id)
        await asyncio.sleep(DEPOSIT_CHECK_SECONDS)


def _deposit_events(store: Store, events: WebhookStore) -> DepositAlert:
    """paymaster.deposit_low to every project that has the chain enabled."""

    async def alert(status: DepositStatus) -> None:
        data = {
            "chainId": status.chain_id,
            "paymaster": status.paymaster,
            "depositWei": str(status.deposit_wei),
            "thresholdWei": str(status.threshold_wei),
        }
        for project_id in await store.project_ids_with_chain(status.chain_id):
            await events.emit(EventType.PAYMASTER_DEPOSIT_LOW, project_id, data)

    return alert


def _bound(method: Callable[[list[Any]], Awaitable[Any]]) -> Callable[[str], Awaitable[Any]]:
    async def call(op_hash: str) -> Any:
        return await method([op_hash])

    return call


async def _close_cycles_forever(services: Services, every_s: float = 60.0) -> None:
    """Close billing cycles as they end (invoices, plan changes, next month's grants)."""
    billing = services.platform.billing
    while True:
        now = datetime.now(UTC)
        try:
            for project_id in await billing.due_projects(now):
                await billing.close_due_cycles(project_id, now)
        except Exception:
            log.exception("closing billing cycles failed; retrying in %.0f s", every_s)
        await asyncio.sleep(every_s)


def _admin_token(data_dir: Path) -> str:
    """The operator token for /v1/admin, made once and kept (0600) in the data directory."""
    path = data_dir / "admin-token"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(32) + "\n")
        path.chmod(0o600)
    return path.read_text().strip()


def _chains_json(services: Services) -> dict[str, Any]:
    return {
        str(c.chain_id): {
            "rpcUrl": c.rpc_url,
            "entryPoint": c.deployment.entry_point,
            "accountFactory": c.deployment.account_factory,
            "paymaster": c.deployment.paymaster,
            "notary": c.deployment.notary,
        }
        for c in services.chains.values()
    }


# Small local files, read and written once at start-up: blocking I/O is fine here.
def _read(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _write(path: Path, demo: dict[str, Any]) -> None:
    path.write_text(json.dumps(demo, indent=2) + "\n")
    path.chmod(0o600)
