"""Entry points: a worker with the standard handlers, in-process or as its own process.

- `entryway up`: `async with running_worker(engine, usage=store): ...` runs it in the
  background of the server's event loop and stops it gracefully on exit.
- `entryway worker --config FILE`: every task kind, over the services `build_services` makes
  from the settings (chains, keys, database): `entryway.composition.run_configured_worker`.
- `entryway worker --database-url URL` / `--data-dir DIR`: `run_worker(url)`, webhook
  deliveries (and notary anchoring for an `entryway up` data directory).

Both run until SIGINT or SIGTERM; the database must already be migrated (`entryway migrate`).
Deliveries need the service's secrets key, to open the signing secrets: the settings'
`secrets.key` or `secrets.key_file` (ENTRYWAY_SECRETS_KEY, ENTRYWAY_SECRETS_KEY_FILE), else
`<data-dir>/secrets-key`. They go to public destinations only unless --webhook-allow-private
(or `webhooks.allow_private`, ENTRYWAY_WEBHOOK_ALLOW_PRIVATE=true).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.pricebook import PriceBook, default_price_book
from entryway.errors import EntrywayError
from entryway.observability.logs import configure_logging
from entryway.observability.operator_http import HttpAddress
from entryway.settings.checks import StartCheckError, database_url
from entryway.settings.loading import SettingsError, load_settings
from entryway.settings.model import Settings
from entryway.storage.engine import make_engine
from entryway.storage.secret_box import SecretBox, SecretsKeyError
from entryway.storage.store import Store
from entryway.storage.tasks import Clock, TaskQueue, utc_now
from entryway.storage.webhook_log import DeliveryLog
from entryway.storage.webhook_secrets import seal_stored_secrets
from entryway.storage.webhooks import DELIVERY_TASK, WebhookStore
from entryway.worker.chains import notary_handlers_from
from entryway.worker.delivery import (
    DeliveryFailed,
    DeliverySettings,
    EndpointAlerts,
    UsageRecorder,
    WebhookDeliveryHandler,
)
from entryway.worker.destinations import Resolver, guarded_client, system_resolver
from entryway.worker.worker import Handler, Worker

CONFIG_EXIT = 2  # the settings, or what they point at, are wrong: nothing was started
log = logging.getLogger("entryway.worker")


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
    secrets: SecretBox | None = None,
    resolver: Resolver = system_resolver,
    on_failure: DeliveryFailed | None = None,
) -> AsyncIterator[Worker]:
    """A Worker on `engine` with the webhook delivery handler (plus `handlers`), its HTTP
    client open for the duration of the block. Not started: call run() or drain().
    Deliveries need `secrets` (the box the endpoints' secrets were sealed with); `resolver`
    answers the DNS questions of the destination checks; `on_failure` is told each attempt
    that did not deliver (the process's metrics)."""
    settings = settings or WorkerSettings()
    queue = TaskQueue(engine, clock=clock)
    async with guarded_client(settings.delivery.destinations, resolver=resolver) as http:
        delivery = WebhookDeliveryHandler(
            DeliveryLog(engine, clock=clock, secrets=secrets),
            WebhookStore(engine, queue=queue, clock=clock),
            usage or Store(engine),
            price_book or default_price_book(),
            http,
            alerts=alerts,
            settings=settings.delivery,
            clock=clock,
            on_failure=on_failure,
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
    secrets: SecretBox | None = None,
    on_failure: DeliveryFailed | None = None,
) -> AsyncIterator[Worker]:
    """The worker running in the background of this event loop for the block's duration."""
    async with worker_for(
        engine,
        settings=settings,
        usage=usage,
        price_book=price_book,
        alerts=alerts,
        handlers=handlers,
        secrets=secrets,
        on_failure=on_failure,
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
    secrets: SecretBox | None = None,
) -> None:
    """Run a worker against `database_url` until `stop` is set (or forever). With `data_dir`
    (an `entryway up` data directory) it also anchors notary batches. With `secrets`, the
    stored signing secrets are checked against it first: a wrong key stops the worker here
    (SecretsKeyError), before it signs anything."""
    engine = make_engine(database_url)
    try:
        if secrets is not None:
            await seal_stored_secrets(engine, secrets)
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
                    secrets=secrets,
                )
            )
            await (stop or asyncio.Event()).wait()
    finally:
        await engine.dispose()


def worker_settings(settings: Settings) -> WorkerSettings:
    w = settings.worker
    return WorkerSettings(
        concurrency=w.concurrency,
        lease_seconds=w.lease_seconds,
        poll_interval=w.poll_interval,
        shutdown_grace=w.shutdown_grace,
        delivery=DeliverySettings(
            timeout=w.delivery_timeout, destinations=settings.webhooks.destinations
        ),
    )


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="entryway worker",
        description="Run durable tasks: with --config every kind (webhooks, notary anchoring, "
        "sponsorship settlement, recovery steps); else webhook deliveries, and notary "
        "anchoring for an `entryway up` data directory.",
    )
    parser.add_argument("--config", type=Path, default=None, help="the TOML settings file")
    parser.add_argument(
        "--database-url",
        default=None,
        help="SQLAlchemy URL of the service's database (default: the settings' database_url, "
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
    parser.add_argument("--concurrency", type=int, default=None)
    parser.add_argument("--lease-seconds", type=float, default=None)
    parser.add_argument("--poll-interval", type=float, default=None)
    parser.add_argument("--shutdown-grace", type=float, default=None)
    parser.add_argument("--delivery-timeout", type=float, default=None)
    parser.add_argument(
        "--webhook-allow-private",
        action="store_true",
        help="deliver to private, loopback and link-local addresses too (default: the "
        "settings' webhooks.allow_private, else public destinations only)",
    )
    parser.add_argument(
        "--http-port",
        type=int,
        default=None,
        help="serve /healthz, /readyz and /metrics for operators on this port (with "
        "configured chains; default: not served)",
    )
    parser.add_argument(
        "--http-host", default="127.0.0.1", help="the interface of --http-port (127.0.0.1)"
    )
    return parser.parse_args(argv)


def settings_of(args: argparse.Namespace) -> Settings:
    """The settings file and environment, with the options given over them."""
    timing = {
        "concurrency": args.concurrency,
        "lease_seconds": args.lease_seconds,
        "poll_interval": args.poll_interval,
        "shutdown_grace": args.shutdown_grace,
        "delivery_timeout": args.delivery_timeout,
    }
    overrides: dict[str, Any] = {"worker": {k: v for k, v in timing.items() if v is not None}}
    if args.database_url:
        overrides["database_url"] = args.database_url
    if args.data_dir is not None:
        overrides["data_dir"] = args.data_dir
    if args.webhook_allow_private:
        overrides["webhooks"] = {"allow_private": True}
    return load_settings(args.config, **overrides)


# Runs every task kind over the services the settings describe, until the event is set
# (`entryway.composition.run_configured_worker`, handed in by the `entryway worker` command:
# the worker package never imports the composition root that imports it).
# With an address, it serves the operator endpoint there too.
ConfiguredWorker = Callable[[Settings, asyncio.Event, HttpAddress | None], Awaitable[None]]


async def _until_signalled(
    args: argparse.Namespace, settings: Settings, configured: ConfiguredWorker | None
) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    http = None if args.http_port is None else HttpAddress(args.http_host, args.http_port)
    if settings.chains:
        if configured is None:
            raise SettingsError(
                ["chains: this entry point runs webhook deliveries only; use `entryway worker`"]
            )
        await configured(settings, stop, http)
        return
    if http is not None:
        raise SettingsError(["--http-port: serve it from a worker with chains (--config FILE)"])
    if settings.database_url is None and args.data_dir is None:
        raise SettingsError(["database_url: give --config, --database-url or --data-dir"])
    try:
        secrets = settings.secrets.source().box(args.data_dir)
    except SecretsKeyError as exc:  # no key, or not a key: the settings are wrong (exit 2)
        raise SettingsError([f"secrets.key: {exc}"]) from None
    await run_worker(
        database_url(settings),
        settings=worker_settings(settings),
        stop=stop,
        data_dir=args.data_dir,
        notary_key_file=args.notary_key_file,
        secrets=secrets,
    )


def main(argv: Sequence[str] | None = None, configured: ConfiguredWorker | None = None) -> None:
    """`entryway worker` (with `configured`) and `python -m entryway.worker` (without)."""
    args = _arguments(argv)
    try:
        settings = settings_of(args)
        configure_logging(settings.log.json_lines, settings.log.level)
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_until_signalled(args, settings, configured))
    except (SettingsError, StartCheckError) as exc:
        for problem in exc.problems:
            sys.stderr.write(f"error: {problem}\n")
        sys.exit(CONFIG_EXIT)
    except EntrywayError as exc:
        sys.exit(f"error: {exc}")
