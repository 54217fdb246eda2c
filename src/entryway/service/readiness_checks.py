"""What the service needs to serve, as readiness checks (entryway.observability.readiness):
its database, Redis when rate limits are shared through it (degraded, not failing, when it
does not answer: the process then counts alone), and on each chain the node
(answering with the right chain id), the bundler's executor balances and the deposits of the
chain's paymasters (one per EntryPoint release). Details name amounts and public addresses,
never credentials: RPC URLs are shown as scheme, host and port."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import partial

from sqlalchemy import text

from entryway.chain.rpc import RpcTransportError
from entryway.observability.readiness import Check, DegradedError, NotReadyError
from entryway.observability.redaction import mask_secrets, public_url
from entryway.service.services import ChainRuntime, Services
from entryway.service.shared_redis import NOT_COUNTED, UNREACHABLE, SharedRedis


@dataclass(frozen=True, slots=True)
class ReadinessSettings:
    executor_min_wei: int = 10**16  # an executor key under this cannot pay for bundles long
    # None: the deposit watcher's own alert threshold; 0: the deposit is not checked.
    deposit_min_wei: int | None = None
    timeout_s: float = 2.0  # per check
    cache_s: float = 2.0  # how long one run answers every poll


def service_checks(services: Services, settings: ReadinessSettings) -> dict[str, Check]:
    checks: dict[str, Check] = {"database": partial(_database, services)}
    try:
        limiter = services.platform.limiter
    except RuntimeError:  # not started: the database check says so
        limiter = None
    shared = limiter.shared if limiter is not None else None
    if shared is not None:
        checks["redis"] = partial(_redis, shared)
    for chain_id, chain in sorted(services.chains.items()):
        checks[f"chain.{chain_id}.rpc"] = partial(_rpc, chain)
        if chain.bundling.executors:  # none but where the chain's leader runs in process
            checks[f"chain.{chain_id}.executors"] = partial(_executors, chain, settings)
        if services.paymaster is not None and settings.deposit_min_wei != 0:
            checks[f"chain.{chain_id}.paymaster_deposit"] = partial(
                _deposit, services, chain_id, settings
            )
    return checks


async def _database(services: Services) -> str:
    try:
        engine = services.store.engine
    except RuntimeError:
        raise NotReadyError("the service is not started") from None
    async with engine.connect() as db:
        await db.execute(text("SELECT 1"))
    return f"{engine.dialect.name} answered"


async def _redis(shared: SharedRedis) -> str:
    """Degraded, not failing, when Redis does not count (no answer, or a write refused: out of
    memory, read-only, not allowed): the process then counts in its own memory, from this
    check on if no request had found it out first."""
    try:
        await shared.probe()
    except UNREACHABLE as exc:  # the text may name the URL: say what failed
        shared.failed(exc)
        raise DegradedError(
            "no answer: rate limits and sign-in throttles counted in each process"
        ) from None
    except NOT_COUNTED as exc:  # Redis's own error reply (OOM, READONLY, NOPERM...)
        shared.failed(exc)
        raise DegradedError(
            f"a write refused ({mask_secrets(str(exc))}): rate limits and sign-in throttles "
            "counted in each process"
        ) from None
    return "counted a probe write"


async def _rpc(chain: ChainRuntime) -> str:
    where = public_url(chain.rpc_url)
    try:
        answered = await chain.eth.chain_id()
    except RpcTransportError as exc:
        raise NotReadyError(f"{where}: {exc}") from None  # the condition, not the type
    if answered != chain.chain_id:
        raise NotReadyError(f"{where} serves chain {answered}, not {chain.chain_id}")
    mode = chain.rpc.bundler.validator.mode
    return f"{where} serves chain {answered}; validation mode {mode.value}"


async def _executors(chain: ChainRuntime, settings: ReadinessSettings) -> str:
    executors = chain.bundling.executors
    balances = await asyncio.gather(*(chain.eth.get_balance(e.address) for e in executors))
    low = [
        f"{e.address} holds {b} wei"
        for e, b in zip(executors, balances, strict=True)
        if b < settings.executor_min_wei
    ]
    if low:
        raise NotReadyError(f"under {settings.executor_min_wei} wei: {'; '.join(low)}")
    return f"{len(executors)} executor(s), the poorest holds {min(balances)} wei"


async def _deposit(services: Services, chain_id: int, settings: ReadinessSettings) -> str:
    """Every paymaster of the chain, v0.8's and each other release's, holds the floor: a
    sponsored op draws on the deposit of its own release's paymaster, so one drained deposit
    fails that release's sponsored ops as surely as v0.8's would fail v0.8's."""
    shown, short = [], []
    for d in services.deposits_on(chain_id):
        name = f"v{d.version} paymaster {d.paymaster}"
        if d.reading is None:
            short.append(f"{name}: not read yet")
            continue
        wei, floor = d.reading.deposit_wei, settings.deposit_min_wei
        if floor is None:
            floor = d.reading.threshold_wei
        if wei < floor:
            short.append(f"{name}: {wei} wei, under {floor} wei")
        shown.append(f"{name}: {wei} wei (at least {floor} wei wanted)")
    if short:
        raise NotReadyError("; ".join(short))
    return "; ".join(shown)
