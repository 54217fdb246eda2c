"""What a process checks before it serves anything, and `entryway config check` prints.

Offline the settings' shape is already checked (`load_settings`); here the world is: each
key file is readable and holds a key, each RPC URL answers `eth_chainId` with its chain's id,
the contracts are where the settings say, and the database answers. Each problem is one line
naming its key; a URL is shown masked (scheme, host and port; never a path, query or user,
where hosted nodes put their API keys).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

from eth_account import Account
from eth_account.signers.local import LocalAccount
from sqlalchemy import text

from entryway.chain.retry import RetryPolicy
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.deploy.deployer import Deployment
from entryway.deploy.plan import ENTRY_POINT_ADDRESS, Operator, plan_deployment
from entryway.errors import EntrywayError
from entryway.keys import load_key_file
from entryway.paymaster.signer import PaymasterSigner
from entryway.settings.model import ChainSettings, Settings
from entryway.settings.validation_modes import pinned_mode_problems
from entryway.storage.engine import alembic_config, make_engine, sqlite_url
from entryway.storage.private_files import private_directory

# A start should not wait long on a node that is down: one try, a few seconds.
_CHECK_RETRY = RetryPolicy(attempts=1)
log = logging.getLogger(__name__)
_CHECK_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class ChainKeys:
    executors: tuple[LocalAccount, ...]
    paymaster_signer: PaymasterSigner
    notary_submitter: LocalAccount


@dataclass(frozen=True, slots=True)
class PreparedChain:
    """A chain's settings with its keys read and its contract addresses known."""

    settings: ChainSettings
    keys: ChainKeys
    deployment: Deployment


@dataclass(frozen=True, slots=True)
class Preflight:
    chains: tuple[PreparedChain, ...]
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


class StartCheckError(EntrywayError):
    """A check made at start failed: the process must not serve."""

    def __init__(self, problems: tuple[str, ...]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def mask_url(url: str) -> str:
    """`https://host:port/***`: enough to tell endpoints apart, no credential shown."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    port = f":{parts.port}" if parts.port else ""
    hidden = "/***" if (parts.path.strip("/") or parts.query or parts.username) else ""
    return f"{parts.scheme}://{host}{port}{hidden}"


def database_url(settings: Settings) -> str:
    if settings.database_url is not None:
        return settings.database_url.get_secret_value()
    return sqlite_url(settings.data_dir)


def masked_database_url(settings: Settings) -> str:
    """The database URL with any password replaced."""
    url = database_url(settings)
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


def executor_keys(index: int, chain: ChainSettings) -> tuple[LocalAccount, ...] | list[str]:
    """The keys in the chain's executor key files, or the problems (naming each file's key)."""
    problems: list[str] = []
    keys: list[LocalAccount] = []
    for n, path in enumerate(chain.executor_key_files):
        try:
            keys.extend(_keys_in(path))
        except EntrywayError as exc:
            problems.append(f"chains[{index}].executor_key_files[{n}]: {exc}")
    return problems if problems else tuple(keys)


def read_chain_keys(index: int, chain: ChainSettings, settings: Settings) -> ChainKeys | list[str]:
    """The chain's keys, or its problems (each naming the key that points at the file)."""
    where = f"chains[{index}]"
    executors = executor_keys(index, chain)
    problems: list[str] = executors if isinstance(executors, list) else []
    signer: PaymasterSigner | None = None
    try:
        signer = _paymaster_signer(chain, settings)
    except EntrywayError as exc:
        key = "paymaster_signer_key_file" if chain.paymaster_signer_key_file else "paymaster"
        problems.append(f"{where}.{key}: {exc}")
    if chain.addresses is None and chain.deploy_owner is None:
        problems.append(
            f"{where}.deploy_owner: the API and the worker need the contract addresses or "
            "the deploy_owner, one of the two"
        )
    notary: LocalAccount | None = None
    if chain.notary_submitter_key_file is None:
        problems.append(
            f"{where}.notary_submitter_key_file: the API and the worker need it (a file for "
            "`entryway bundler` alone may leave it out)"
        )
    else:
        try:
            notary = load_key_file(chain.notary_submitter_key_file)
        except EntrywayError as exc:
            problems.append(f"{where}.notary_submitter_key_file: {exc}")
    if chain.executor_funding_key_file is not None:  # used by the bundler process alone
        try:
            load_key_file(chain.executor_funding_key_file)
        except EntrywayError as exc:
            problems.append(f"{where}.executor_funding_key_file: {exc}")
    if problems or isinstance(executors, list) or signer is None or notary is None:
        return problems
    return ChainKeys(executors, signer, notary)


def _keys_in(path: Path) -> list[LocalAccount]:
    """One or more hex keys, one a line."""
    lines = load_text(path).split()
    keys = []
    for line in lines:
        try:
            keys.append(Account.from_key(line))
        except (ValueError, TypeError):
            raise EntrywayError(f"{path} holds something that is not a private key") from None
    if not keys:
        raise EntrywayError(f"{path} holds no key")
    return keys


def load_text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise EntrywayError(f"cannot read key file {path}: {exc.strerror}") from None


def _paymaster_signer(chain: ChainSettings, settings: Settings) -> PaymasterSigner:
    own = chain.paymaster_signer_key_file or settings.paymaster.signer_key_file
    if own is not None:
        return PaymasterSigner.load(own, env={})
    if settings.paymaster.signer_key is not None:
        return PaymasterSigner.from_key(settings.paymaster.signer_key.get_secret_value())
    return PaymasterSigner.load(env={})  # raises, naming what to give


def deployment_of(chain: ChainSettings, keys: ChainKeys) -> Deployment:
    """The addresses given, or those `entryway deploy` derived from the owner and keys."""
    if chain.addresses is not None:
        a = chain.addresses
        return Deployment(
            chain.chain_id,
            a.entry_point,
            a.account_factory,
            a.paymaster,
            a.notary,
            entry_point_v07=a.entry_point_v07,
            paymaster_v07=a.paymaster_v07,
            simple_account_factory_v07=a.simple_account_factory_v07,
            entry_point_v09=a.entry_point_v09,
            paymaster_v09=a.paymaster_v09,
            simple_account_factory_v09=a.simple_account_factory_v09,
            entry_point_v06=a.entry_point_v06,
            paymaster_v06=a.paymaster_v06,
            simple_account_factory_v06=a.simple_account_factory_v06,
            simple_7702_account=a.simple_7702_account,
        )
    assert chain.deploy_owner is not None  # read_chain_keys requires one of the two
    plan = plan_deployment(
        Operator(chain.deploy_owner, keys.paymaster_signer.address, keys.notary_submitter.address)
    )
    # EntryPoint v0.9's paymaster binds to the release on a chain that carries it, to its
    # release candidate elsewhere: which, only the chain says, so v0.9 is sponsored on the
    # addresses `entryway deploy` printed (its bundler serves it either way).
    return replace(
        Deployment.of_plan(chain.chain_id, plan),
        entry_point_v09=None,
        paymaster_v09=None,
        simple_account_factory_v09=None,
    )


def check_service_keys(settings: Settings) -> list[str]:
    """The secrets key and the operator token, when configured, can be read and used."""
    problems = []
    if settings.secrets.configured:
        try:
            settings.secrets.source().box(settings.data_dir)
        except EntrywayError as exc:
            problems.append(f"secrets: {exc}")
    if settings.admin_token_file is not None:
        try:
            token = settings.admin_token_file.read_text().strip()
        except OSError as exc:
            reason = exc.strerror
            problems.append(f"admin_token_file: cannot read {settings.admin_token_file}: {reason}")
        else:
            if not token:
                problems.append(f"admin_token_file: {settings.admin_token_file} is empty")
    return problems


async def check_rpc_urls(index: int, chain: ChainSettings) -> list[str]:
    """Every URL that answers must answer eth_chainId with the chain's id, and at least one
    must answer. A fallback URL that is down only warns: the node client fails over past
    it, and a process restarted during one provider's outage must still start."""
    wrong: list[str] = []
    silent: list[str] = []
    for n, url in enumerate(chain.urls()):
        where = f"chains[{index}].rpc_urls[{n}]"
        shown = mask_url(url)
        try:
            # Numbered and named as the running processes' node clients will log it.
            async with JsonRpcClient(
                url,
                timeout=_CHECK_TIMEOUT_S,
                connect_timeout=_CHECK_TIMEOUT_S,
                retry=_CHECK_RETRY,
                chain_id=chain.chain_id,
                first_endpoint=n,
            ) as rpc:
                answered = await EthClient(rpc).chain_id()
        except (EntrywayError, OSError, ValueError):
            silent.append(
                f"{where}: {shown} (chain {chain.chain_id}, endpoint #{n + 1}) does not "
                "answer eth_chainId"
            )
            continue
        if answered != chain.chain_id:
            wrong.append(
                f"{where}: {shown} is chain {answered}, not chain {chain.chain_id} "
                f"({chain.display_name})"
            )
    if len(silent) == len(chain.urls()):
        return wrong + silent  # nothing answers: the chain cannot be served
    for problem in silent:
        log.warning("%s; starting on the other URLs", problem)
    return wrong


async def check_contracts(index: int, chain: ChainSettings, deployment: Deployment) -> list[str]:
    """Code at each EntryPoint and paymaster, and the notary: a chain not deployed yet (or
    deployed before EntryPoint v0.7 or v0.9 was served beside v0.8) says so here."""
    problems: list[str] = []
    async with JsonRpcClient(
        chain.urls(), timeout=_CHECK_TIMEOUT_S, connect_timeout=_CHECK_TIMEOUT_S
    ) as rpc:
        eth = EthClient(rpc)
        for name, address in (
            ("entry_point", deployment.entry_point),
            ("paymaster", deployment.paymaster),
            ("notary", deployment.notary),
            ("entry_point_v07", deployment.entry_point_v07),
            ("paymaster_v07", deployment.paymaster_v07),
            ("simple_account_factory_v07", deployment.simple_account_factory_v07),
            ("entry_point_v09", deployment.entry_point_v09),
            ("paymaster_v09", deployment.paymaster_v09),
            ("simple_account_factory_v09", deployment.simple_account_factory_v09),
            ("entry_point_v06", deployment.entry_point_v06),
            ("paymaster_v06", deployment.paymaster_v06),
            ("simple_account_factory_v06", deployment.simple_account_factory_v06),
        ):
            if address is None:
                continue  # v0.6, v0.7 or v0.9 not configured: served without it
            try:
                code = await eth.get_code(address)
            except EntrywayError:
                return problems  # check_rpc_urls has said why
            if not code:
                source = "addresses" if chain.addresses is not None else "deploy_owner"
                problems.append(
                    f"chains[{index}].{source}: no {name} contract at {address} on chain "
                    f"{chain.chain_id} (run `entryway deploy` first)"
                )
    return problems


async def bundler_problems(settings: Settings) -> list[str]:
    """What `entryway bundler --config FILE --chain N` needs, for every chain of the file:
    executor keys, nodes answering with the chain's id, the EntryPoint it bundles for; and
    the database. Not the paymaster signer nor the notary submitter: the API and the worker
    use those, and a bundler's file may leave them out."""
    problems: list[str] = []
    if not settings.chains:
        problems.append("chains: no chain for a bundler to bundle for")
    for index, chain in enumerate(settings.chains):
        keys = executor_keys(index, chain)
        if isinstance(keys, list):
            problems.extend(keys)
        elif not keys:
            problems.append(
                f"chains[{index}].executor_key_files: chain {chain.chain_id}'s bundler needs "
                "at least one executor key file"
            )
        rpc_problems = await check_rpc_urls(index, chain)
        problems.extend(rpc_problems)
        if not rpc_problems:
            problems.extend(await _check_bundled_entry_point(index, chain))
            problems.extend(await pinned_mode_problems(index, chain))
    problems.extend(await check_database(settings))
    return problems


async def _check_bundled_entry_point(index: int, chain: ChainSettings) -> list[str]:
    entry_point = chain.addresses.entry_point if chain.addresses else ENTRY_POINT_ADDRESS
    async with JsonRpcClient(
        chain.urls(), timeout=_CHECK_TIMEOUT_S, connect_timeout=_CHECK_TIMEOUT_S
    ) as rpc:
        try:
            code = await EthClient(rpc).get_code(entry_point)
        except EntrywayError:
            return []  # check_rpc_urls has said why
    if code:
        return []
    source = "addresses.entry_point" if chain.addresses else "chain_id"
    return [
        f"chains[{index}].{source}: no EntryPoint at {entry_point} on chain {chain.chain_id} "
        "(run `entryway deploy` first)"
    ]


async def check_database(settings: Settings) -> list[str]:
    if settings.database_url is None:
        private_directory(settings.data_dir)  # the SQLite default lives there (0700)
    engine = make_engine(database_url(settings))
    try:
        async with asyncio.timeout(_CHECK_TIMEOUT_S), engine.connect() as connection:
            await connection.execute(text("SELECT 1"))
    except Exception as exc:
        reason = type(exc).__name__
        return [f"database_url: cannot reach {masked_database_url(settings)} ({reason})"]
    finally:
        await engine.dispose()
    return []


async def schema_problems(settings: Settings) -> list[str]:
    """The schema at this release's revision, or the line saying to migrate."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    url = database_url(settings)
    head = ScriptDirectory.from_config(alembic_config(url)).get_current_head()
    engine = make_engine(url)
    try:
        async with engine.connect() as connection:
            current = await connection.run_sync(
                lambda sync: MigrationContext.configure(sync).get_current_revision()
            )
    finally:
        await engine.dispose()
    if current == head:
        return []
    return [
        f"database_url: the schema of {masked_database_url(settings)} is at revision "
        f"{current or 'none'}, not {head}: run `entryway migrate` first"
    ]


async def preflight(settings: Settings, *, online: bool = True, schema: bool = False) -> Preflight:
    """Read every key, then (online) ask every node and the database. Collects every
    problem rather than stopping at the first, so one run shows all there is to fix."""
    problems: list[str] = check_service_keys(settings)
    prepared: list[PreparedChain] = []
    for index, chain in enumerate(settings.chains):
        keys = read_chain_keys(index, chain, settings)
        if isinstance(keys, list):
            problems.extend(keys)
        else:
            prepared.append(PreparedChain(chain, keys, deployment_of(chain, keys)))
    signers = {p.keys.paymaster_signer.address for p in prepared}
    if len(signers) > 1:
        problems.append(
            "paymaster.signer_key_file: every chain signs sponsorships with one key; "
            "give the same paymaster signer to all chains"
        )
    if online:
        for index, chain in enumerate(settings.chains):
            rpc_problems = await check_rpc_urls(index, chain)
            problems.extend(rpc_problems)
            ready = next((p for p in prepared if p.settings is chain), None)
            if ready is not None and not rpc_problems:
                problems.extend(await check_contracts(index, chain, ready.deployment))
            if not rpc_problems:
                problems.extend(await pinned_mode_problems(index, chain))
        database = await check_database(settings)
        problems.extend(database)
        if schema and not database:
            problems.extend(await schema_problems(settings))
    return Preflight(tuple(prepared), tuple(problems))


async def checked(settings: Settings, *, schema: bool = False) -> tuple[PreparedChain, ...]:
    """The prepared chains, or StartCheckError with every problem."""
    result = await preflight(settings, schema=schema)
    if not result.ok:
        raise StartCheckError(result.problems)
    return result.chains


def summary(settings: Settings, *, bundler: bool = False) -> list[str]:
    """What `config check` prints when all is well; secrets masked. A bundler's has no
    Redis nor HTTP address (it uses neither) but each chain's executor addresses, to fund."""
    lines = [f"database   {masked_database_url(settings)}"]
    if not bundler:
        lines += [
            f"redis      {mask_url(settings.redis_url.get_secret_value()) if settings.redis_url else 'none (rate limits in memory)'}",  # noqa: E501
            f"http       {settings.http.host}:{settings.http.port}",
        ]
    for index, chain in enumerate(settings.chains):
        urls = ", ".join(mask_url(u) for u in chain.urls())
        flag = "  (maintenance)" if chain.maintenance else ""
        lines.append(f"chain      {chain.chain_id} {chain.display_name}: {urls}{flag}")
        keys = executor_keys(index, chain) if bundler else []
        if keys and not isinstance(keys, list):
            lines.append(f"executors  {', '.join(key.address for key in keys)}")
    return lines
