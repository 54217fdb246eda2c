"""`entryway up`, `api`, `serve` and `worker`: the service's processes; and `verify`, a
proof of inclusion checked offline and on chain."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from entryway.cli.support import parse_chains, run
from entryway.composition.collector import settle_collector
from entryway.domain.networks import DEFAULT_DEVNET_CHAINS
from entryway.errors import EntrywayError
from entryway.settings.commands import (
    ConfigFile,
    checked_chains,
    settings_of,
)


def up(
    data_dir: Annotated[
        Path | None,
        typer.Option(
            "--data-dir", help="Where state and devnet keys live; default: data_dir, .entryway."
        ),
    ] = None,
    port: Annotated[
        int | None, typer.Option(help="Port of the HTTP API; default: http.port, 8000.")
    ] = None,
    host: Annotated[
        str | None, typer.Option(help="Interface to listen on; default: http.host, 127.0.0.1.")
    ] = None,
    chains: Annotated[str, typer.Option(help="Devnet chain ids.")] = ",".join(
        map(str, DEFAULT_DEVNET_CHAINS)
    ),
    base_port: Annotated[int, typer.Option(help="First devnet RPC port; 0: any.")] = 8545,
    worker: Annotated[
        bool, typer.Option(help="Run durable tasks in this process (else: `entryway worker`).")
    ] = True,
    config: ConfigFile = None,
) -> None:
    """Run the embedded default: devnets with every contract, the API, the worker and each
    chain's bundler leader in one process, over one durable intake.

    State lives in the data dir (SQLite unless the settings name a database); the devnet
    becomes the settings' chains. `<data-dir>/demo.json` holds a demo project's API keys.
    """
    from contextlib import asynccontextmanager

    import uvicorn
    from fastapi import FastAPI

    from entryway.composition.embedded import run_embedded
    from entryway.composition.serving import configure_process_logging, http_app, uvicorn_options
    from entryway.devnet.devnet import claim_ports
    from entryway.service.services import Services

    http = {k: v for k, v in (("host", host), ("port", port)) if v is not None}
    given = {"data_dir": data_dir} if data_dir is not None else {}
    settings = settings_of(config, http=http, **given)
    configure_process_logging(settings)
    host, port, data = settings.http.host, settings.http.port, settings.data_dir
    services = Services()
    # Before the server: a taken port is told in one line, not in a failed startup's trace.
    run(claim_ports(data, parse_chains(chains), base_port))

    @asynccontextmanager
    async def lifespan(app_: FastAPI):  # type: ignore[no-untyped-def]
        async with run_embedded(
            settings,
            services,
            devnet_chains=parse_chains(chains),
            devnet_base_port=base_port,
            worker=worker,
            metrics=app_.state.metrics,
        ) as demo:
            api = f"http://{host}:{port}"
            typer.secho(f"API        {api}  (GET /healthz, /get-sdk-defaults, POST /rpc/<chainId>)")
            typer.secho(f"Dashboard  {api}/dashboard  (sign up; operator: sign in with the token)")
            typer.secho(f"API key    {demo['apiKey']}  (admin; also in {data / 'demo.json'})")
            typer.secho(f"Service    {demo['serviceKey']}  (for apps and the SDK)")
            typer.secho(f"Operator   token in {data / 'admin-token'}  (/v1/admin/...)")
            yield

    api = http_app(settings, services, lifespan)
    settle_collector()
    uvicorn.run(api, host=host, port=port, **uvicorn_options(settings))


def api(
    config: ConfigFile = None,
    host: Annotated[str | None, typer.Option(help="Interface; default: http.host.")] = None,
    port: Annotated[int | None, typer.Option(help="Port; default: http.port.")] = None,
) -> None:
    """Serve the REST API and JSON-RPC for the configured chains (one replica of many).

    The start checks run first (`entryway config check`); the schema must be in place
    (`entryway migrate`). Accepted ops go to the durable intake, bundled by each chain's
    `entryway bundler --config FILE --chain N` leader; durable tasks run in `entryway worker`
    processes. For all of it in one process: `entryway serve`.
    """
    from contextlib import asynccontextmanager

    import uvicorn
    from fastapi import FastAPI

    from entryway.composition import build_services
    from entryway.composition.serving import configure_process_logging, http_app, uvicorn_options
    from entryway.service.services import Services

    http = {k: v for k, v in (("host", host), ("port", port)) if v is not None}
    settings = settings_of(config, http=http)
    configure_process_logging(settings)
    prepared = checked_chains(settings)
    services = Services()

    @asynccontextmanager
    async def lifespan(_: FastAPI):  # type: ignore[no-untyped-def]
        async with build_services(settings, services=services, chains=prepared):
            typer.secho(f"API        http://{settings.http.host}:{settings.http.port}")
            yield

    app_ = http_app(settings, services, lifespan)
    settle_collector()
    uvicorn.run(app_, host=settings.http.host, port=settings.http.port, **uvicorn_options(settings))


def serve(
    config: ConfigFile = None,
    host: Annotated[str | None, typer.Option(help="Interface; default: http.host.")] = None,
    port: Annotated[int | None, typer.Option(help="Port; default: http.port.")] = None,
) -> None:
    """Serve the configured chains from one process: the API, the worker and each chain's
    bundler leader, over one database (SQLite in data_dir unless database_url names one).

    The schema is brought up to date, then the start checks run; each chain needs its
    executor keys. Ops whose hash was returned survive a crash: they are in the intake.
    """
    from contextlib import asynccontextmanager

    import uvicorn
    from fastapi import FastAPI

    from entryway.composition.one_process import leaderless, running_in_one_process
    from entryway.composition.serving import configure_process_logging, http_app
    from entryway.service.services import Services
    from entryway.settings.commands import fail, migrate_schema

    http = {k: v for k, v in (("host", host), ("port", port)) if v is not None}
    settings = settings_of(config, http=http)
    configure_process_logging(settings)
    migrate_schema(settings)
    prepared = checked_chains(settings)
    if leaderless(prepared):
        fail(leaderless(prepared))
    services = Services()

    @asynccontextmanager
    async def lifespan(app_: FastAPI):  # type: ignore[no-untyped-def]
        metrics = app_.state.metrics
        async with running_in_one_process(settings, services, prepared, metrics=metrics):
            typer.secho(f"API        http://{settings.http.host}:{settings.http.port}")
            yield

    app_ = http_app(settings, services, lifespan)
    settle_collector()
    uvicorn.run(
        app_, host=settings.http.host, port=settings.http.port, log_level="warning", log_config=None
    )


def verify(
    proof_file: Annotated[Path, typer.Argument(help="The proof of inclusion (JSON).")],
    document: Annotated[
        Path | None, typer.Option(help="The notarized file; checked against the proof's leaf.")
    ] = None,
    rpc_url: Annotated[
        str | None, typer.Option(help="JSON-RPC of the proof's chain; checks the anchor.")
    ] = None,
) -> None:
    """Verify a proof of inclusion: offline, and on chain with --rpc-url.

    Exit status: 0 valid, 1 not valid, 2 not checked (unreadable file, unreachable node).
    """
    from entryway.notary.report import ExitStatus, render, verify_proof_file

    try:
        outcome = asyncio.run(verify_proof_file(proof_file, document, rpc_url))
    except EntrywayError as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(ExitStatus.NOT_CHECKED) from None
    for line in render(outcome, document_given=document is not None):
        typer.echo(line)
    raise typer.Exit(outcome.status)


def worker(
    config: ConfigFile = None,
    database_url: Annotated[
        str | None,
        typer.Option(
            help="SQLAlchemy URL of the service's database (default: the settings' "
            "database_url, else the SQLite file in --data-dir)."
        ),
    ] = None,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            help="An `entryway up` data directory: its chains and notary key let this worker "
            "anchor notary batches too."
        ),
    ] = None,
    notary_key_file: Annotated[
        Path | None, typer.Option(help="The notary submitter's key (default: the data dir's).")
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option(help="Tasks run at once (default: worker.concurrency, 4).")
    ] = None,
    lease_seconds: Annotated[
        float | None,
        typer.Option(help="How long a claimed task is held before another worker may take it."),
    ] = None,
    poll_interval: Annotated[
        float | None, typer.Option(help="Seconds between looks at the queue when it is idle.")
    ] = None,
    shutdown_grace: Annotated[
        float | None,
        typer.Option(help="Seconds running tasks get to finish on SIGINT or SIGTERM."),
    ] = None,
    delivery_timeout: Annotated[
        float | None, typer.Option(help="Seconds one webhook delivery may take.")
    ] = None,
    webhook_allow_private: Annotated[
        bool,
        typer.Option(
            "--webhook-allow-private",
            help="Deliver to private, loopback and link-local addresses too (default: the "
            "settings' webhooks.allow_private, else public destinations only).",
        ),
    ] = False,
    http_port: Annotated[
        int | None,
        typer.Option(
            help="Serve /healthz, /readyz and /metrics for operators on this port (with "
            "configured chains; default: not served)."
        ),
    ] = None,
    http_host: Annotated[str, typer.Option(help="The interface of --http-port.")] = "127.0.0.1",
) -> None:
    """Run durable tasks as their own process.

    With --config FILE: every task kind (webhook deliveries, notary anchoring, sponsorship
    settlement, recovery steps) for the configured chains. Without: webhook deliveries on
    --database-url (default: the settings' database_url), and notary anchoring too with
    --data-dir (an `entryway up` data directory). `entryway up` runs one in-process unless
    --no-worker.
    """
    from entryway.composition.worker_process import run_configured_worker
    from entryway.worker.main import main as worker_main

    given: dict[str, object | None] = {
        "--config": config,
        "--database-url": database_url,
        "--data-dir": data_dir,
        "--notary-key-file": notary_key_file,
        "--concurrency": concurrency,
        "--lease-seconds": lease_seconds,
        "--poll-interval": poll_interval,
        "--shutdown-grace": shutdown_grace,
        "--delivery-timeout": delivery_timeout,
        "--http-port": http_port,
        "--http-host": http_host,
    }
    argv = [
        part for name, value in given.items() if value is not None for part in (name, str(value))
    ]
    if webhook_allow_private:
        argv.append("--webhook-allow-private")
    settle_collector()
    worker_main(argv, configured=run_configured_worker)
