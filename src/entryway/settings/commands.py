"""The settings' own commands (`entryway config check`, `entryway migrate`) and what every
command that serves uses to read and check its settings: each problem on a line of its own,
exit status 2, nothing started."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from eth_account.signers.local import LocalAccount

from entryway.domain.networks import FeeRules

if TYPE_CHECKING:
    from entryway.settings.checks import PreparedChain
    from entryway.settings.model import Settings

config_app = typer.Typer(name="config", help="Check the settings.", no_args_is_help=True)

CONFIG_EXIT = 2  # the settings, or what they point at, are wrong: nothing was started
ConfigFile = Annotated[
    Path | None,
    typer.Option(
        "--config", help="TOML settings file (default: $ENTRYWAY_CONFIG).", show_default=False
    ),
]


def settings_of(config: Path | None, **overrides: Any) -> Settings:
    """The process's settings; each problem printed on a line of its own, exit status 2."""
    from entryway.settings.loading import SettingsError, load_settings

    try:
        return load_settings(config, **overrides)
    except SettingsError as exc:
        fail(exc.problems)
        raise  # not reached: fail exits


def fail(problems: Sequence[str]) -> NoReturn:
    for problem in problems:
        typer.secho(f"error: {problem}", fg=typer.colors.RED, err=True)
    raise typer.Exit(CONFIG_EXIT)


def checked_chains(settings: Settings) -> tuple[PreparedChain, ...]:
    """The start checks of every serving process: keys, nodes, contracts, database."""
    from entryway.settings.checks import preflight

    result = asyncio.run(preflight(settings, schema=True))
    if not result.ok:
        fail(result.problems)
    return result.chains


def migrate(config: ConfigFile = None) -> None:
    """Bring the database's schema to this release's (idempotent; run before `api`)."""
    from entryway.settings.checks import masked_database_url

    settings = settings_of(config)
    migrate_schema(settings)
    typer.echo(f"schema up to date: {masked_database_url(settings)}")


def migrate_schema(settings: Settings) -> None:
    """The schema brought to this release's (exit status 2 when the database is wrong); the
    data directory made first (0700) when SQLite keeps its file there."""
    from entryway.settings.checks import check_database, database_url
    from entryway.storage.engine import make_engine
    from entryway.storage.engine import migrate as upgrade
    from entryway.storage.private_files import private_directory

    if settings.database_url is None:
        private_directory(settings.data_dir)

    async def run() -> None:
        problems = await check_database(settings)
        if problems:
            fail(problems)
        engine = make_engine(database_url(settings))
        try:
            await upgrade(engine)
        finally:
            await engine.dispose()

    asyncio.run(run())


class Process(StrEnum):
    """The process a settings file is checked for: each needs its own part of it."""

    API = "api"
    WORKER = "worker"
    BUNDLER = "bundler"


@config_app.command("check")
def config_check(
    config: ConfigFile = None,
    offline: Annotated[bool, typer.Option(help="Check the file and keys only.")] = False,
    process: Annotated[
        Process,
        typer.Option(
            "--for",
            help="The process the file is for: api and worker need the paymaster signer and "
            "notary submitter keys; bundler needs the executor keys instead.",
        ),
    ] = Process.API,
) -> None:
    """Check the settings as a start of that process would: each problem on a line naming
    its key (exit 2), else a summary with secrets masked (exit 0)."""
    from entryway.settings.checks import bundler_problems, preflight, schema_problems, summary
    from entryway.settings.validation_modes import validation_report

    settings = settings_of(config)
    if process is Process.BUNDLER:
        # A bundler's start asks its nodes and the database, and so does its check.
        problems = asyncio.run(bundler_problems(settings))
        offline = False
    else:
        problems = list(asyncio.run(preflight(settings, online=not offline)).problems)
    modes: list[str] = []
    if not offline and not problems:  # what each node can trace, and the mode that follows
        modes, wrong = asyncio.run(validation_report(settings))
        problems += wrong
    if problems:
        fail(problems)
    for line in [*summary(settings, bundler=process is Process.BUNDLER), *modes]:
        typer.echo(line)
    if not offline:  # a fresh database is fine here: `migrate` comes next
        behind = asyncio.run(schema_problems(settings))
        typer.echo("schema     " + ("up to date" if not behind else "run `entryway migrate`"))
    typer.echo(f"checked    for {process.value}")
    typer.echo("ok")


@dataclass(frozen=True, slots=True)
class BundlerChain:
    """What `entryway bundler --config FILE --chain N` takes from the chain's table."""

    rpc_urls: tuple[str, ...]
    executor_keys: tuple[LocalAccount, ...]
    entry_point: str
    fee_rules: FeeRules
    # The executors' watch (`bundler.executor_watch`): the floor, and the top-up, if any.
    executor_min_balance_wei: int = 10**16
    executor_topup_wei: int = 0
    executor_funding_key: LocalAccount | None = None
    rpc_timeout_s: float = 5.0
    rpc_trace_timeout_s: float = 30.0
    rpc_max_log_range_blocks: int | None = None
    block_gas_share_percent: int | None = None
    trusted_entities: tuple[str, ...] = ()  # the configured ones and the operator's own
    validation_mode: str = "auto"  # the chain's setting (`bundler.validation.modes`)


def bundler_chain(config: Path | None, chain_id: int) -> BundlerChain:
    """The chain's node URLs (each checked to answer with its id), executor keys and
    EntryPoint from the settings; exit status 2 naming the key on a problem."""
    from entryway.bundler.standalone import planned_factories
    from entryway.deploy.deployer import Deployment
    from entryway.deploy.plan import ENTRY_POINT_ADDRESS
    from entryway.errors import EntrywayError
    from entryway.keys import load_key_file
    from entryway.settings.checks import check_rpc_urls, executor_keys
    from entryway.settings.networks import register_networks
    from entryway.settings.validation_modes import pinned_mode_problems

    settings = settings_of(config)
    found = [(i, c) for i, c in enumerate(settings.chains) if c.chain_id == chain_id]
    if not found:
        fail([f"chains: no chain {chain_id} in the settings"])
    index, chain = found[0]
    keys = executor_keys(index, chain)
    problems = (keys if isinstance(keys, list) else []) + asyncio.run(check_rpc_urls(index, chain))
    if not problems:  # a pinned validation mode this node cannot serve stops it here
        problems += asyncio.run(pinned_mode_problems(index, chain))
    funding = None
    if chain.executor_funding_key_file is not None:
        try:
            funding = load_key_file(chain.executor_funding_key_file)
        except EntrywayError as exc:
            problems.append(f"chains[{index}].executor_funding_key_file: {exc}")
    if (
        funding is not None
        and not isinstance(keys, list)
        and funding.address in {k.address for k in keys}
    ):
        # Its transfers and the bundles would race for the same nonces.
        problems.append(
            f"chains[{index}].executor_funding_key_file: the funding key is an executor key"
        )
    if problems or isinstance(keys, list):
        fail(problems)
    register_networks([chain])  # the sanity bounds follow the chain's configured rules
    entry_point = chain.addresses.entry_point if chain.addresses else ENTRY_POINT_ADDRESS
    # The operator's factories and paymasters when their addresses are given; with
    # deploy_owner alone, the factories (the paymasters' addresses follow from the paymaster
    # signer, which this process may not have).
    own = (
        Deployment(chain_id, **chain.addresses.model_dump()).own_entities
        if chain.addresses
        else planned_factories()
    )
    floor = chain.executor_min_balance_wei
    return BundlerChain(
        tuple(chain.urls()),
        keys,
        entry_point,
        chain.fee_rules_resolved,
        executor_min_balance_wei=settings.readiness.executor_min_wei if floor is None else floor,
        executor_topup_wei=chain.executor_topup_wei,
        executor_funding_key=funding,
        rpc_timeout_s=chain.rpc_timeout_s,
        rpc_trace_timeout_s=chain.rpc_trace_timeout_s,
        rpc_max_log_range_blocks=chain.rpc_max_log_range_blocks,
        block_gas_share_percent=chain.bundle_block_gas_share_percent,
        trusted_entities=tuple(chain.trusted_entities) + own,
        validation_mode=chain.validation_mode,
    )
