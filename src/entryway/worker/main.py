"""Entry points: a worker with the standard handlers, in-process or as its own process.

- `entryway up`: `async with running_worker(engine, usage=store): ...` runs it in the
  background of the server's event loop and stops it gracefully on exit.
- `entryway worker` / `python -m entryway.worker --database-url URL`: `run_worker(url)` until
  SIGINT or SIGTERM. The database must already be migrated (the service does that).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.pricebook import PriceBook, default_price_book
from entryway.storage.engine import make_engine, sqlite_url
from entryway.storage.store import Store
from entryway.storage.tasks import Clock, TaskQueue, utc_now
from entryway.storage.webhook_log import DeliveryLog
from entryway.storage.webhooks import DELIVERY_TASK, WebhookStore
from entryway.worker.chains import notary_handlers_from
from entryway.worker.delivery import (
    DeliverySettings,
    EndpointAlerts,
    UsageRecorder,
    WebhookDeliveryHandler,
)
from entryway.worker.worker import Handler, Worker


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    concurrency: int = 4
    lease_seconds: float = 30.0
    poll_interval: float = 1.0
    shutdown_grace: float = 10.0
    delivery: DeliverySettings = field(default_factory=DeliverySettings)


@asynccontextmanager
async def worker_for(
    engine: AsyncEngine,
    *,
    settings: WorkerSettings | None = None,
    usage: UsageRecorder | None = None,
    price_book: PriceBook | None = None,
    alerts: EndpointAlerts | None = None,
    handlers: Mapping[str, Handler] | None = None,
    clock: Clock = utc_now,
) -> AsyncIterator[Worker]:
    """A Worker on `engine` with the webhook delivery handler (plus `handlers`), its HTTP
    client open for the duration of the block. Not started: call run() or drain()."""
    settings = settings or WorkerSettings()
    queue = TaskQueue(engine, clock=clock)
    async with httpx.AsyncClient() as http:
        delivery = WebhookDeliveryHandler(
            DeliveryLog(engine, clock=clock),
            WebhookStore(engine, queue=queue, clock=clock),
            usage or Store(engine),
            price_book or default_price_book(),
            http,
            alerts=alerts,
            settings=settings.delivery,
            clock=clock,
        )
        yield Worker(
            queue,
            {DELIVERY_TASK: delivery, **(handlers or {})},
            concurrency=settings.concurrency,
            lease_seconds=settings.lease_seconds,
            poll_interval=settings.poll_interval,
            shutdown_grace=settings.shutdown_grace,
        )


@asynccontextmanager
async def running_worker(
    engine: AsyncEngine,
    *,
    settings: WorkerSettings | None = None,
    usage: UsageRecorder | None = None,
    price_book: PriceBook | None = None,
    alerts: EndpointAlerts | None = None,
    handlers: Mapping[str, Handler] | None = None,
) -> AsyncIterator[Worker]:
    """The worker running in the background of this event loop for the block's duration."""
    async with worker_for(
        engine,
        settings=settings,
        usage=usage,
        price_book=price_book,
        alerts=alerts,
        handlers=handlers,
    ) as worker:
        job = asyncio.create_task(worker.run(), name="entryway-worker")
        try:
            yield worker
        finally:
            worker.stop()
            await job


async def run_worker(
    database_url: str,
    *,
    settings: WorkerSettings | None = None,
    stop: asyncio.Event | None = None,
    price_book: PriceBook | None = None,
    alerts: EndpointAlerts | None = None,
    data_dir: Path | None = None,
    notary_key_file: Path | None = None,
) -> None:
    """Run a worker against `database_url` until `stop` is set (or forever). With `data_dir`
    (an `entryway up` data directory) it also anchors notary batches."""
    engine = make_engine(database_url)
    try:
        async with contextlib.AsyncExitStack() as stack:
            handlers: dict[str, Handler] = {}
            if data_dir is not None:
                handlers = await stack.enter_async_context(
                    notary_handlers_from(engine, data_dir, notary_key_file)
                )
            await stack.enter_async_context(
                running_worker(
                    engine,
                    settings=settings,
                    price_book=price_book,
                    alerts=alerts,
                    handlers=handlers,
                )
            )
            await (stop or asyncio.Event()).wait()
    finally:
        await engine.dispose()


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="entryway worker", description="Run durable tasks (webhook deliveries, ...)."
    )
    parser.add_argument(
        "--database-url",
        default=os.environ.get("ENTRYWAY_DATABASE_URL"),
        help="SQLAlchemy URL of the service's database (default: $ENTRYWAY_DATABASE_URL, "
        "else the SQLite file in --data-dir)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="an `entryway up` data directory: its chains and notary key let this worker "
        "anchor notary batches too",
    )
    parser.add_argument("--notary-key-file", type=Path, default=None)
    defaults = WorkerSettings()
    parser.add_argument("--concurrency", type=int, default=defaults.concurrency)
    parser.add_argument("--lease-seconds", type=float, default=defaults.lease_seconds)
    parser.add_argument("--poll-interval", type=float, default=defaults.poll_interval)
    parser.add_argument("--shutdown-grace", type=float, default=defaults.shutdown_grace)
    parser.add_argument("--delivery-timeout", type=float, default=defaults.delivery.timeout)
    args = parser.parse_args(argv)
    if not args.database_url and args.data_dir is not None:
        args.database_url = sqlite_url(args.data_dir)
    if not args.database_url:
        parser.error("give --database-url (or --data-dir) or set ENTRYWAY_DATABASE_URL")
    return args


def settings_from(args: argparse.Namespace) -> WorkerSettings:
    return WorkerSettings(
        concurrency=args.concurrency,
        lease_seconds=args.lease_seconds,
        poll_interval=args.poll_interval,
        shutdown_grace=args.shutdown_grace,
        delivery=DeliverySettings(timeout=args.delivery_timeout),
    )


async def _until_signalled(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await run_worker(
        args.database_url,
        settings=settings_from(args),
        stop=stop,
        data_dir=args.data_dir,
        notary_key_file=args.notary_key_file,
    )


def main(argv: Sequence[str] | None = None) -> None:
    args = _arguments(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_until_signalled(args))
