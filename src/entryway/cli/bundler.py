"""`entryway bundler`: a standalone ERC-4337 bundler for any EVM chain (its mempool in
memory), or, with --config and --chain N, the chain's elected leader bundling the service's
durable intake."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from entryway.cli.support import run
from entryway.composition.collector import settle_collector
from entryway.errors import EntrywayError
from entryway.settings.commands import CONFIG_EXIT, ConfigFile, bundler_chain, settings_of


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
    validation_mode: Annotated[
        str,
        typer.Option(
            help="How ERC-7562 is enforced: auto (the strongest the node serves), native "
            "(erc7562Tracer), opcodes (struct logger), calls (callTracer and prestateTracer) "
            "or untraced (the EntryPoint's checks alone; only when named here).",
        ),
    ] = "auto",
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

    from entryway.bundler.standalone import StandaloneSettings, read_executor_keys
    from entryway.bundler.states import BundlingMode
    from entryway.bundler.validation.modes import parse_mode
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
        settle_collector()
        run(lead_until_signalled(settings_of(config), chain, configured, http))
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
    try:
        pinned_mode = parse_mode(validation_mode)
    except EntrywayError as exc:
        typer.secho(f"error: --validation-mode: {exc}", err=True)
        raise typer.Exit(CONFIG_EXIT) from None
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
        validation_mode=pinned_mode,
        min_stake_wei=min_stake_wei,
        min_unstake_delay_s=min_unstake_delay,
        beneficiary=beneficiary,
        deploy_entry_point=deploy_entry_point,
        block_gas_share_percent=block_gas_share,
        trusted_entities=trusted,
    )
    app = create_standalone_app(settings, limits)
    settle_collector()
    uvicorn.run(app, host=host, port=port, **uvicorn_options(loaded))
