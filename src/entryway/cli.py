"""The `entryway` command line."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from entryway.dashboard.operator_commands import operator_app
from entryway.domain.networks import DEFAULT_DEVNET_CHAINS, NETWORKS
from entryway.errors import EntrywayError
from entryway.paymaster.commands import paymaster_app
from entryway.settings.commands import (
    CONFIG_EXIT,
    ConfigFile,
    bundler_chain,
    checked_chains,
    config_app,
    migrate,
    settings_of,
)

if TYPE_CHECKING:
    pass

app = typer.Typer(
    name="entryway",
    help="Self-hostable ERC-4337 infrastructure: bundler, paymaster, wallets, notary.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(paymaster_app)
app.add_typer(config_app)
app.add_typer(operator_app)

DataDir = Annotated[Path, typer.Option("--data-dir", help="Where state and devnet keys live.")]


def _parse_chains(value: str) -> list[int]:
    try:
        return [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        raise typer.BadParameter(f"not a comma-separated list of chain ids: {value!r}") from None


def _emit(obj: object) -> None:
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


async def _until_signalled() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


async def _run_devnet(
    data_dir: Path, chains: list[int], base_port: int, block_time: float | None
) -> None:
    from entryway.devnet.devnet import Devnet

    async with Devnet(data_dir, chains, base_port=base_port, block_time_s=block_time) as devnet:
        for chain in devnet.chains:
            _emit(chain.as_json())
        await _until_signalled()


def _run(coro: object) -> None:
    try:
        asyncio.run(coro)  # type: ignore[arg-type]
    except EntrywayError as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from None


@app.command()
def devnet(
    chains: Annotated[str, typer.Option(help="Chain ids to run, comma-separated.")] = ",".join(
        map(str, DEFAULT_DEVNET_CHAINS)
    ),
    data_dir: DataDir = Path(".entryway"),
    base_port: Annotated[
        int, typer.Option(help="Port of the first chain's RPC (the next ones follow); 0: any.")
    ] = 8545,
    block_time: Annotated[
        float | None, typer.Option(help="Seconds between blocks; default: mine each tx at once.")
    ] = None,
) -> None:
    """Run local anvil devnets with EntryPoint v0.8 and v0.7 and Entryway's contracts deployed.

    Prints one JSON line per chain; Ctrl-C stops them, their state kept in the data dir.
    """
    _run(_run_devnet(data_dir, _parse_chains(chains), base_port, block_time))


@app.command()
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
    _run(claim_ports(data, _parse_chains(chains), base_port))

    @asynccontextmanager
    async def lifespan(app_: FastAPI):  # type: ignore[no-untyped-def]
        async with run_embedded(
            settings,
            services,
            devnet_chains=_parse_chains(chains),
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
    uvicorn.run(api, host=host, port=port, **uvicorn_options(settings))


@app.command()
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
    uvicorn.run(app_, host=settings.http.host, port=settings.http.port, **uvicorn_options(settings))


@app.command()
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
    uvicorn.run(
        app_, host=settings.http.host, port=settings.http.port, log_level="warning", log_config=None
    )


app.command()(migrate)


@app.command()
def deploy(
    rpc_url: Annotated[str, typer.Option(help="The chain's JSON-RPC endpoint.")],
    key_file: Annotated[Path, typer.Option(help="File holding the operator's private key.")],
    chain_id: Annotated[
        int | None, typer.Option(help="The chain id the RPC must answer with.")
    ] = None,
    paymaster_signer: Annotated[
        str | None, typer.Option(help="Address that signs sponsorships; default: the operator.")
    ] = None,
    notary_submitter: Annotated[
        str | None, typer.Option(help="Address allowed to anchor; default: the operator.")
    ] = None,
    paymaster_deposit_wei: Annotated[
        int, typer.Option(help="Top each paymaster's deposit up to this.")
    ] = 0,
    paymaster_stake_wei: Annotated[
        int, typer.Option(help="Top each paymaster's stake up to this.")
    ] = 0,
    unstake_delay: Annotated[int, typer.Option(help="Paymaster unstake delay, seconds.")] = 86_400,
    rpc_probes: Annotated[
        int, typer.Option(help="eth_blockNumber probes of the RPC's stability.")
    ] = 5,
    rpc_probe_interval: Annotated[
        float, typer.Option(help="Seconds between two stability probes.")
    ] = 0.5,
    rpc_max_failures: Annotated[
        int, typer.Option(help="Probes that may fail with the RPC still stable.")
    ] = 0,
    rpc_max_latency_ms: Annotated[
        int, typer.Option(help="The slowest probe answer allowed, milliseconds.")
    ] = 2_000,
    max_head_age_blocks: Annotated[
        int, typer.Option(help="How many block times old the latest block may be.")
    ] = 30,
) -> None:
    """Check a network against the requirements, then deploy everything missing (idempotent):
    EntryPoint v0.8 and v0.7, each with Entryway's paymaster, and the contracts beside them."""
    from entryway.deploy.commands import deploy_network
    from entryway.deploy.rpc_health import RpcHealthThresholds

    try:
        rpc_health = RpcHealthThresholds(
            probes=rpc_probes,
            probe_interval_s=rpc_probe_interval,
            max_failures=rpc_max_failures,
            max_latency_ms=rpc_max_latency_ms,
            max_head_age_blocks=max_head_age_blocks,
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None

    _run(
        deploy_network(
            rpc_url=rpc_url,
            key_file=key_file,
            expected_chain_id=chain_id,
            paymaster_signer=paymaster_signer,
            notary_submitter=notary_submitter,
            deposit_wei=paymaster_deposit_wei,
            stake_wei=paymaster_stake_wei,
            unstake_delay_s=unstake_delay,
            emit=_emit,
            rpc_health=rpc_health,
        )
    )


@app.command()
def addresses(
    owner: Annotated[str, typer.Option(help="The operator (owner) address.")],
    paymaster_signer: Annotated[str | None, typer.Option()] = None,
    notary_submitter: Annotated[str | None, typer.Option()] = None,
) -> None:
    """Compute, offline, where `deploy` puts every contract (the same on every chain; on one
    that carries the EntryPoint v0.9 release, v0.9's paymaster and factory bind to it, and
    `deploy` prints their addresses)."""
    from entryway.deploy.plan import Operator, plan_deployment
    from entryway.domain.evm import checksum

    plan = plan_deployment(
        Operator(
            owner=checksum(owner),
            paymaster_signer=checksum(paymaster_signer or owner),
            notary_submitter=checksum(notary_submitter or owner),
        )
    )
    _emit({c.name: c.address for c in plan.contracts()})


@app.command()
def bundler(
    rpc_url: Annotated[
        str | None, typer.Option(help="The chain's JSON-RPC endpoint (without --chain).")
    ] = None,
    executor_key_file: Annotated[
        list[Path] | None,
        typer.Option(help="File(s) of executor private keys, one per line (without --chain)."),
    ] = None,
    chain: Annotated[
        int | None,
        typer.Option(help="Take the chain's URLs, executor keys and EntryPoint from --config."),
    ] = None,
    config: ConfigFile = None,
    entry_point: Annotated[
        list[str] | None,
        typer.Option(
            help="An EntryPoint to serve (v0.8, v0.7 or v0.9; repeat for several). Default: v0.8 "
            "and "
            "every other EntryPoint release the chain carries."
        ),
    ] = None,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port of the JSON-RPC endpoint (POST /rpc).")] = 3000,
    debug_rpc: Annotated[bool, typer.Option(help="Serve the debug_bundler_* methods.")] = False,
    auto_bundle_interval: Annotated[
        float,
        typer.Option(
            help="Seconds between automatic bundles on a chain without a steady block "
            "interval (with one, a bundle goes out just before each block)."
        ),
    ] = 1.0,
    manual: Annotated[bool, typer.Option(help="Start in manual bundling mode.")] = False,
    tracing: Annotated[bool, typer.Option(help="Enforce ERC-7562 on a trace.")] = True,
    min_stake_wei: Annotated[int, typer.Option(help="MIN_STAKE_VALUE of ERC-7562.")] = 10**18,
    min_unstake_delay: Annotated[int, typer.Option(help="MIN_UNSTAKE_DELAY, seconds.")] = 86_400,
    beneficiary: Annotated[str | None, typer.Option(help="Who receives bundle fees.")] = None,
    deploy_entry_point: Annotated[
        bool,
        typer.Option(
            help="Deploy EntryPoint v0.8, v0.7 and v0.9 (its release candidate, on a chain "
            "without the release) first where the chain lacks them (and, on anvil, place v0.6 "
            "at its canonical address)."
        ),
    ] = False,
    http_port: Annotated[
        int | None,
        typer.Option(help="With --chain: serve /healthz, /readyz, /metrics."),
    ] = None,
    http_host: Annotated[str, typer.Option(help="The interface of --http-port.")] = "127.0.0.1",
    block_gas_share: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=100,
            help="Percent of the block gas limit one bundle may use (default: the chain's).",
        ),
    ] = None,
    trusted_entity: Annotated[
        list[str] | None,
        typer.Option(help="A factory, paymaster or aggregator reputation never throttles."),
    ] = None,
) -> None:
    """Run a standalone ERC-4337 bundler (EntryPoint v0.8, v0.7, v0.9) for any EVM chain: given
    by --rpc-url and --executor-key-file, or by --chain N from the settings (--config)."""
    import uvicorn

    from entryway.bundler.standalone import (
        StandaloneSettings,
        freeze_startup_heap,
        read_executor_keys,
    )
    from entryway.bundler.states import BundlingMode
    from entryway.composition import request_limits
    from entryway.composition.leader import lead_until_signalled
    from entryway.composition.serving import configure_process_logging, uvicorn_options
    from entryway.domain.entry_points import V08
    from entryway.domain.evm import checksum
    from entryway.observability.operator_http import HttpAddress
    from entryway.service.bundler_app import create_standalone_app

    loaded = settings_of(config)
    configure_process_logging(loaded)
    limits = request_limits(loaded)
    fee_rules = None
    default_entry_point = V08.address
    if chain is not None:
        # The chain's leader or a standby, bundling the service's intake.
        configured = bundler_chain(config, chain)
        http = None if http_port is None else HttpAddress(http_host, http_port)
        freeze_startup_heap()
        _run(lead_until_signalled(settings_of(config), chain, configured, http))
        return
    if rpc_url is None or not executor_key_file:
        typer.secho("error: give --chain N, or --rpc-url and --executor-key-file", err=True)
        raise typer.Exit(CONFIG_EXIT)
    else:
        urls = rpc_url
        try:
            keys = read_executor_keys(executor_key_file)
        except EntrywayError as exc:
            typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
            raise typer.Exit(1) from None
    if http_port is not None:  # this bundler answers /healthz on --port
        typer.secho("error: --http-port is for a configured chain's leader (--chain N)", err=True)
        raise typer.Exit(CONFIG_EXIT)
    served = entry_point or [default_entry_point]
    try:
        trusted = tuple(checksum(a) for a in trusted_entity or ())
    except ValueError:
        typer.secho("error: --trusted-entity takes a 20-byte hex address", err=True)
        raise typer.Exit(CONFIG_EXIT) from None
    settings = StandaloneSettings(
        rpc_url=urls,
        entry_point=served[0],
        # Named EntryPoints are served alone; by default every canonical release found.
        also_entry_points=tuple(served[1:]) if entry_point else None,
        fee_rules=fee_rules,
        executor_keys=keys,
        debug_rpc=debug_rpc,
        auto_bundle_interval_s=auto_bundle_interval,
        mode=BundlingMode.MANUAL if manual else BundlingMode.AUTO,
        tracing=tracing,
        min_stake_wei=min_stake_wei,
        min_unstake_delay_s=min_unstake_delay,
        beneficiary=beneficiary,
        deploy_entry_point=deploy_entry_point,
        block_gas_share_percent=block_gas_share,
        trusted_entities=trusted,
    )
    app = create_standalone_app(settings, limits)
    freeze_startup_heap()
    uvicorn.run(app, host=host, port=port, **uvicorn_options(loaded))


@app.command()
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


@app.command()
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
    worker_main(argv, configured=run_configured_worker)


@app.command()
def networks() -> None:
    """List the supported networks."""
    for n in NETWORKS.values():
        _emit(
            {
                "chainId": n.chain_id,
                "name": n.name,
                "family": n.family.value,
                "environment": n.environment.value,
                "nativeToken": n.native_token.symbol,
                "explorer": n.explorer_url,
                "l2": n.is_l2,
                "publicRpcs": [
                    {"url": r.url, "operator": r.operator, "limits": r.limits}
                    for r in n.public_rpcs
                ],
            }
        )


def main() -> None:
    app()
