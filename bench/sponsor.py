"""Sponsorship benchmark: sponsored UserOperations through the API as the SDK sends them.

Method: `entryway up` runs as its own process (devnets for 80002 and 84532 that mine each
transaction at once, SQLite, one bundler per chain with one executor key and auto bundling,
the ERC-7677 paymaster, the settler, the worker), rate limits raised out of the way
(ENTRYWAY_RATE_LIMITS). A FREE project on 80002 with credits bought through the operator
routes, no sponsorship policy (every op sponsored). The client is the SDK in this process
(`Entryway.init`, `client.wallet(owner)`, `wallet.send(calls)`, `op.wait()`), one connection
pool for every wallet. Each op calls `execute(0x…bEEF, 0, 0x)` on Entryway's SmartAccount,
signed by its owner. The SDK's service calls are timed by wrapping its `ServiceApi`:
"prepare+send" runs from the start of `pm_getPaymasterStubData` to the answer of
`eth_sendUserOperation` (with the estimate, `pm_getPaymasterData` and the owner's signature
between); send-to-receipt from the start of `eth_sendUserOperation` to the first
`eth_getUserOperationReceipt` that returns the receipt, `op.wait()` polling every --poll
seconds (0.5 s, the SDK's default). Warm-up (not measured): every account's first op, which
deploys it (initCode), all sent at --concurrency. Then two workloads: lockstep, --accounts
wallets each sending --ops sequential ops (send, wait for the receipt, send the next), all
at once; burst, --burst other wallets sending one op each from --concurrency workers, each
op waited for as soon as it is sent. Credits: "held" is what `/op-status` reports while the
sponsorship is held (as `op.wait()` reads it), "settled" what it reports once final; the
project's balance drop over each workload is checked against the settled sum. CPU: each
process's user + system time over the workload (/proc), the rest of the machine's busy time
from /proc/stat.

Run: `python -m bench.sponsor` (add `--write-doc` to refresh docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from entryway_sdk import Entryway, PendingUserOperation, SmartWallet
from entryway_sdk.transport import ServiceApi
from eth_account import Account

from bench.docs import write_section
from bench.sponsor_report import OpTrace, Phase, report
from bench.sponsor_service import RunningService, entryway_up, machine_cpu, own_cpu

CHAIN_ID = 80002
CREDITS = 10**11
CALL = {"to": "0x000000000000000000000000000000000000bEEF", "value": 0}
_current: ContextVar[OpTrace | None] = ContextVar("sponsor_trace", default=None)


def instrument(api: ServiceApi) -> None:
    """Time every JSON-RPC call the SDK makes to the service, and read the credits out of the
    /op-status answers `op.wait()` asks for, into the current op's trace."""
    rpc, get = api.rpc, api.get

    async def timed_rpc(chain_id: int, method: str, params: list[Any]) -> Any:
        t0 = time.perf_counter()
        result = await rpc(chain_id, method, params)
        t1 = time.perf_counter()
        trace = _current.get()
        if trace is not None:
            trace.calls.append((method, t0, t1))
            if method == "eth_getUserOperationReceipt" and result and trace.receipt_at is None:
                trace.receipt_at = t1
        return result

    async def read(path: str, params: Any = None) -> Any:
        result = await get(path, params)
        trace = _current.get()
        if trace is not None and path == "/op-status" and result.get("credits") is not None:
            if result.get("creditsFinal"):
                trace.settled = int(result["credits"])
            elif trace.held is None:
                trace.held = int(result["credits"])
        return result

    api.rpc = timed_rpc  # type: ignore[method-assign]
    api.get = read  # type: ignore[method-assign]


async def send(wallet: SmartWallet, trace: OpTrace) -> PendingUserOperation | None:
    _current.set(trace)
    t0 = time.perf_counter()
    try:
        op = await wallet.send([CALL])
    except Exception as exc:  # counted and reported; the run goes on
        trace.error = f"send: {type(exc).__name__}: {exc}"
        return None
    trace.send_s = time.perf_counter() - t0
    trace.user_op_hash = op.user_op_hash
    return op


async def wait(op: PendingUserOperation, trace: OpTrace, poll: float) -> None:
    _current.set(trace)
    try:
        receipt = await op.wait(timeout=180, poll_interval=poll)
    except Exception as exc:
        trace.error = f"wait: {type(exc).__name__}: {exc}"
        return
    trace.success, trace.tx_hash = receipt.success, receipt.transaction_hash


async def deploy_all(
    wallets: Sequence[SmartWallet], concurrency: int, poll: float
) -> list[OpTrace]:
    """Warm-up: each wallet's first op (initCode), --concurrency at a time."""
    gate = asyncio.Semaphore(concurrency)
    traces = [OpTrace() for _ in wallets]

    async def one(wallet: SmartWallet, trace: OpTrace) -> None:
        async with gate:
            op = await send(wallet, trace)
            if op is not None:
                await wait(op, trace, poll)

    await asyncio.gather(*(one(w, t) for w, t in zip(wallets, traces, strict=True)))
    return traces


async def lockstep(wallets: Sequence[SmartWallet], ops: int, poll: float) -> list[OpTrace]:
    traces: list[OpTrace] = []

    async def user(wallet: SmartWallet) -> None:
        for _ in range(ops):
            trace = OpTrace()
            traces.append(trace)
            op = await send(wallet, trace)
            if op is None:
                continue
            await wait(op, trace, poll)

    await asyncio.gather(*(user(w) for w in wallets))
    return traces


async def burst(wallets: Sequence[SmartWallet], concurrency: int, poll: float) -> list[OpTrace]:
    queue = list(wallets)
    traces: list[OpTrace] = []
    waits: list[asyncio.Task[None]] = []

    async def worker() -> None:
        while queue:
            trace = OpTrace()
            traces.append(trace)
            op = await send(queue.pop(), trace)
            if op is not None:
                waits.append(asyncio.create_task(wait(op, trace, poll)))

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    await asyncio.gather(*waits)
    return traces


async def settle(client: Entryway, traces: Sequence[OpTrace], within_s: float = 120) -> None:
    """Wait until every included op's sponsorship is settled; read its final credits."""
    deadline = time.monotonic() + within_s
    for trace in traces:
        while trace.user_op_hash and trace.success is not None and trace.settled is None:
            raw = await client.api.get(
                "/op-status", {"chainId": CHAIN_ID, "userOpHash": trace.user_op_hash}
            )
            if raw.get("creditsFinal"):
                trace.settled = int(raw["credits"])
            elif time.monotonic() > deadline:
                break
            else:
                await asyncio.sleep(0.2)


async def measure(
    service: RunningService,
    client: Entryway,
    name: str,
    run: Callable[[], Any],
) -> Phase:
    before_cpu = {**service.cpu_seconds(), "client": own_cpu()}
    busy0, total0 = machine_cpu()
    balance = (await client.credits()).balance
    started = time.perf_counter()
    traces = await run()
    after = {**service.cpu_seconds(), "client": own_cpu()}
    busy1, total1 = machine_cpu()
    cpu = {k: after[k] - before_cpu[k] for k in after}
    cpu["machine_busy"], cpu["machine_total"] = busy1 - busy0, total1 - total0
    phase = Phase(name, traces, started, cpu)
    await settle(client, traces)
    phase.balance_drop = balance - (await client.credits()).balance
    return phase


async def main(args: argparse.Namespace) -> tuple[list[str], dict[str, Any]]:
    load_before = os.getloadavg()
    free_gb = shutil.disk_usage("/").free / 1e9
    env = {  # both request windows out of the way, the heavy calls' too
        "ENTRYWAY_RATE_LIMITS": "FREE=1000000/second",
        "ENTRYWAY_HEAVY_RATE_LIMITS": "FREE=1000000/second",
    }
    with tempfile.TemporaryDirectory(prefix="sponsor-bench-") as tmp:
        async with entryway_up(Path(tmp), env) as service:
            tenant = await service.tenant(CHAIN_ID, CREDITS)
            pool = httpx.Limits(max_connections=None, max_keepalive_connections=None)
            async with httpx.AsyncClient(timeout=60, limits=pool) as http:
                client = await Entryway.init(
                    api_key=tenant.api_key,
                    rpc_url=service.rpc_url(CHAIN_ID),
                    chain_id=CHAIN_ID,
                    base_url=service.base_url,
                    http=http,
                )
                instrument(client.api)
                count = args.accounts + args.burst
                wallets = [await client.wallet(Account.create()) for _ in range(count)]
                warm = await deploy_all(wallets, args.concurrency, args.poll)
                await settle(client, warm)
                steady = await measure(
                    service,
                    client,
                    "lockstep",
                    lambda: lockstep(wallets[: args.accounts], args.ops, args.poll),
                )
                print("lockstep", steady.summary(), flush=True)
                open_loop = None
                if args.burst:
                    open_loop = await measure(
                        service,
                        client,
                        "burst",
                        lambda: burst(wallets[args.accounts :], args.concurrency, args.poll),
                    )
                    print("burst", open_loop.summary(), flush=True)
            problems = service.log_problems()
    load_after = os.getloadavg()
    context = {
        "date": datetime.now(UTC).date().isoformat(),
        "load_before": load_before,
        "load_after": load_after,
        "free_gb": free_gb,
        "problems": problems,
    }
    phases = [p for p in (steady, open_loop) if p is not None]
    return report(args, warm, phases, context), context


def write_doc(lines: list[str]) -> None:
    write_section(
        "sponsor",
        "Sponsorship (`python -m bench.sponsor --write-doc`)",
        (__doc__ or "").split("Run:")[0].split("\n\n", 1)[1],
        lines,
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--accounts", type=int, default=50)
    parser.add_argument("--ops", type=int, default=4)
    parser.add_argument("--burst", type=int, default=200, help="0: skip the burst")
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--poll", type=float, default=0.5, help="op.wait()'s poll, s")
    parser.add_argument("--write-doc", action="store_true")
    arguments = parser.parse_args()
    table, ctx = asyncio.run(main(arguments))
    print("\n".join(table))
    print(
        f"free disk before: {ctx['free_gb']:.0f} GB; "
        f"service warnings/errors: {len(ctx['problems'])}"
    )
    for line in ctx["problems"][:20]:
        print("  ", line)
    if arguments.write_doc:
        write_doc(table)
