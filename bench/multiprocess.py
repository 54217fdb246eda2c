"""Multi-process benchmark: the bundler workload through `entryway api` and an `entryway
bundler` leader on PostgreSQL, and through `entryway serve` (API, worker and leader in one
process), next to the standalone bundler; and API throughput with 1, 2 and 4 `entryway api`
replicas.

Method (`bench/multiprocess.py`): every process is a real subprocess started by the bench
(bench/processes.py): a plain anvil 1.7.1 with 1 s blocks, Entryway deployed on it by
`entryway deploy`, a fresh PostgreSQL database (created and dropped by the bench),
`entryway migrate`, Redis for the shared rate limits (raised out of the way:
FREE=1000000/second), one chain with `bundling = "intake"`.

Bundling: the workload of bench/bundler.py, driven by its own code (50 SimpleAccounts
deployed and funded in an unmeasured warm-up, each sending 4 sequential self-paid transfers:
send, poll the receipt every 0.1 s, send the next; all 50 at once), sent to one `entryway api
--config` replica's `/rpc/80002` (the API validates each op and writes it to the intake)
with one `entryway bundler --config --chain 80002` leader holding 4 executor keys; then, on a
new cluster, to one `entryway serve --config` process holding the same 4 keys (its leader
woken by each op the API writes). In the same invocation, the standalone bundler
(`entryway bundler --rpc-url`, bench/bundler.py's run) takes the same workload on its own
devnet, so the columns come from the same machine and minutes. The standalone and `entryway
api` runs go in --rounds pairs (5 by default), the standalone first in even rounds and second
in odd ones: on a small machine one run's accept p50 can differ from the next by half, so
both columns give each figure's median over the rounds, and the last line the accept p50's
medians with each round's ratio. CPU per process is measured over the whole workload,
warm-up included.

API replicas: `GET /get-sdk-defaults?chainId=80002` with one API key (auth, shared rate
limit in Redis, chain access, metering), as bench/api.py asks it, from this process over
keep-alive connections (bench/rawhttp.py), the connections spread evenly over 1, 2 and 4
`entryway api --config` replicas; each run lasts --seconds after a 2 s warm-up. CPU per
process is its user + system time over warm-up and run, divided by their wall time.

Run: `make bench-multiprocess` (or `python -m bench.multiprocess --write-doc`);
`--bundling-only` runs the standalone and `entryway api` rounds alone, `--api-only` the API
replicas' part alone (both print, and write nothing).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Awaitable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import redis.asyncio as redis
from eth_account import Account

from bench import bundler
from bench.docs import write_section
from bench.processes import REDIS, SESSIONS_EVERY_S, Cluster, cpu_seconds
from bench.rawhttp import drive
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.chain.transactor import Transactor
from entryway.deploy.deployer import ContractDeployer
from entryway.deploy.plan import ENTRYWAY_SALT, plan_contract
from entryway.domain.evm import address_bytes

CHAIN_ID = bundler.CHAIN_ID  # the ops are signed for it
BLOCK_S = 1.0
ETHER = 10**18
T = TypeVar("T")


async def cpu_use(pids: dict[str, list[int]], work: Awaitable[T]) -> tuple[T, dict[str, float]]:
    """`work`'s result, and each named group of processes' CPU over it, in cores (this
    process included, as "load generator"). A process gone by the end is not counted."""
    before = {p: cpu_seconds(p) for group in pids.values() for p in group}
    own, wall = time.process_time(), time.monotonic()
    result = await work
    wall = time.monotonic() - wall
    after = {p: cpu_seconds(p) for p in before}
    use = {
        name: sum(max(0.0, after[p] - before[p]) for p in group if after[p]) / wall
        for name, group in pids.items()
    }
    use["load generator (this process)"] = (time.process_time() - own) / wall
    return result, use


async def redis_pid() -> int | None:
    client = redis.from_url(REDIS)
    try:
        return int((await client.info("server"))["process_id"])
    finally:
        await client.aclose()


async def _executors_and_factory(
    cluster: Cluster, eth: EthClient, executors: int
) -> tuple[list[Any], Any]:
    """Funded executor keys for the leader, and the SimpleAccountFactory the load's accounts
    are deployed through (its deployment plan)."""
    keys = [Account.create() for _ in range(executors)]
    for key in keys:
        await eth.rpc.request("anvil_setBalance", [key.address, hex(1000 * ETHER)])
    factory = bundler.FACTORY.bytecode + bytes(12) + address_bytes(cluster.entry_point)
    plan = plan_contract("simple", "SimpleAccountFactory", ENTRYWAY_SALT, factory)
    operator = Account.from_key(cluster.operator)
    await ContractDeployer(eth, Transactor(eth, operator, CHAIN_ID)).ensure(plan)
    return keys, plan


async def multiprocess_bundling(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            Cluster(Path(tmp), CHAIN_ID, BLOCK_S) as cluster,
            JsonRpcClient(cluster.rpc_url) as rpc,
        ):
            eth = EthClient(rpc)
            keys, plan = await _executors_and_factory(cluster, eth, args.executors)
            await cluster.bundler([k.key.hex() for k in keys])
            base = await cluster.api("api")
            url = f"{base}/rpc/{CHAIN_ID}?apikey={cluster.api_key}"
            bench = bundler.Bench(eth, url, cluster.entry_point, plan.address)
            try:
                pids = {
                    "api": [cluster.procs["api"].pid],
                    "bundler leader": [cluster.procs["leader"].pid],
                    "anvil": [cluster.procs["anvil"].pid],
                    "postgresql (this database's backends)": await cluster.backends(),
                }
                done = asyncio.Event()
                sessions = asyncio.create_task(cluster.sessions(done))
                try:
                    result, use = await cpu_use(pids, bundler.inclusion([bench], args))
                finally:
                    done.set()
                    sampled = await sessions
            finally:
                await bench.bundler.aclose()
    return {**result, "cpu": use, "sessions": sampled}


async def one_process_bundling(args: argparse.Namespace) -> dict[str, Any]:
    """The same workload through `entryway serve`: API, worker and leader in one process."""
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            Cluster(Path(tmp), CHAIN_ID, BLOCK_S) as cluster,
            JsonRpcClient(cluster.rpc_url) as rpc,
        ):
            eth = EthClient(rpc)
            keys, plan = await _executors_and_factory(cluster, eth, args.executors)
            base = await cluster.serve("serve", [k.key.hex() for k in keys])
            url = f"{base}/rpc/{CHAIN_ID}?apikey={cluster.api_key}"
            bench = bundler.Bench(eth, url, cluster.entry_point, plan.address)
            try:
                pids = {
                    "serve": [cluster.procs["serve"].pid],
                    "anvil": [cluster.procs["anvil"].pid],
                    "postgresql (this database's backends)": await cluster.backends(),
                }
                result, use = await cpu_use(pids, bundler.inclusion([bench], args))
            finally:
                await bench.bundler.aclose()
    return {**result, "cpu": use}


async def standalone_bundling(args: argparse.Namespace) -> dict[str, Any]:
    # bench/bundler.py's defaults for what this bench does not vary
    extra = {
        "validate": 0,
        "block_gas_limit": 30_000_000,
        "trust_factory": False,
        "open_loop": "",
        "node_latency_ms": 0,
        "faults": False,
    }
    return await bundler.run(argparse.Namespace(**{**vars(args), **extra}))


async def spread_load(
    bases: list[str], key: str, concurrency: int, seconds: float
) -> dict[str, Any]:
    """`concurrency` connections, spread evenly over `bases`, asking the metered read."""
    request = (
        f"GET /get-sdk-defaults?chainId={CHAIN_ID} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {key}\r\n\r\n"
    ).encode()
    share = [concurrency // len(bases) + (i < concurrency % len(bases)) for i in range(len(bases))]
    runs = await asyncio.gather(
        *(
            drive(base, lambda: request, ok=b"HTTP/1.1 200", concurrency=n, seconds=seconds)
            for base, n in zip(bases, share, strict=True)
        )
    )
    latencies = sorted(x for run in runs for x in run.latencies)
    return {
        "rps": len(latencies) / max(run.elapsed for run in runs),
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * latencies[int(len(latencies) * 0.99)],
        "errors": sum(run.errors for run in runs),
    }


async def api_replicas(args: argparse.Namespace) -> list[dict[str, Any]]:
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        async with Cluster(Path(tmp), CHAIN_ID, BLOCK_S) as cluster:
            bases: list[str] = []
            for count in (1, 2, 4):
                while len(bases) < count:
                    bases.append(await cluster.api(f"api{len(bases) + 1}"))
                pids = {
                    f"api replica {i + 1}": [cluster.procs[f"api{i + 1}"].pid] for i in range(count)
                }
                pids["postgresql (this database's backends)"] = await cluster.backends()
                pids["redis"] = [p for p in [await redis_pid()] if p is not None]
                pids["anvil"] = [cluster.procs["anvil"].pid]
                load = spread_load(bases, cluster.api_key, args.concurrency, args.seconds)
                result, use = await cpu_use(pids, load)
                results.append({"replicas": count, **result, "cpu": use})
                print(results[-1], flush=True)
    return results


def machine() -> str:
    model = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")),
        platform.machine(),
    )  # fmt: skip
    return f"{os.cpu_count()} cores ({model}), Python {platform.python_version()}"


def commit() -> str:
    """HEAD, and the source files that differ from it (the processes run the work tree)."""
    git = ["git", "-C", str(Path(__file__).resolve().parents[1])]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    changed = subprocess.run(
        [*git, "status", "--porcelain", "--", "src"], capture_output=True, text=True
    ).stdout.split("\n")
    paths = [line[3:] for line in changed if line.strip()]
    dirty = f" with uncommitted changes to {', '.join(paths)}" if paths else ""
    return f"{head.stdout.strip() or 'unknown'}{dirty}"


def cores(use: dict[str, float]) -> str:
    return ", ".join(f"{name} {value:.2f}" for name, value in use.items())


def report(
    standalone: dict[str, Any],
    multi: dict[str, Any],
    one: dict[str, Any],
    replicas: list[dict[str, Any]],
    meta: str,
) -> list[str]:
    def both(key: str, form: str) -> str:
        return " | ".join(form.format(run[key]) for run in (standalone, multi, one))

    lines = [
        meta,
        "",
        "| figure | standalone `entryway bundler` | `entryway api` (intake) + leader | "
        "`entryway serve` (one process) |",
        "|---|---|---|---|",
        f"| ops included | {both('ops', '{:.0f}')} |",
        f"| included ops/s | {both('included_ops_per_s', '{:.1f}')} |",
        f"| send-to-receipt p50 | {both('p50_s', '{:.2f} s')} |",
        f"| send-to-receipt p95 | {both('p95_s', '{:.2f} s')} |",
        f"| `eth_sendUserOperation` p50 | {both('accept_p50_ms', '{:.0f} ms')} |",
        f"| ops per bundle | {both('ops_per_bundle', '{:.1f}')} |",
        f"| bundle gas per op | {both('gas_per_op', '{:,.0f}')} |",
        "",
        f"CPU over the multi-process run, in cores: {cores(multi['cpu'])}; over the "
        f"one-process run: {cores(one['cpu'])}. PostgreSQL "
        f"sessions of the run's database, sampled every {SESSIONS_EVERY_S * 1000:.0f} ms, on "
        "average: " + ", ".join(f"{k} {v:.1f}" for k, v in multi["sessions"].items()) + ".",
        "",
        "| API replicas | requests/s | p50 ms | p99 ms | errors | API CPU per request | "
        "CPU, in cores |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in replicas:
        api = sum(v for k, v in r["cpu"].items() if k.startswith("api replica"))
        lines.append(
            f"| {r['replicas']} | {r['rps']:,.0f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | "
            f"{r['errors']} | {1000 * api / r['rps']:.2f} ms | {cores(r['cpu'])} |"
        )
    return lines


async def paired_rounds(args: argparse.Namespace) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """--rounds pairs of runs of the bundling workload: the standalone bundler and `entryway
    api` + leader, in turn, the standalone first in even rounds and second in odd ones (a
    drift of the machine within a round falls on both alike). Each pair's accept figures are
    printed as it ends."""
    pairs = []
    for i in range(args.rounds):
        if i % 2 == 0:
            standalone = await standalone_bundling(args)
            multi = await multiprocess_bundling(args)
        else:
            multi = await multiprocess_bundling(args)
            standalone = await standalone_bundling(args)
        pairs.append((standalone, multi))
        print(
            f"accept p50: standalone {standalone['accept_p50_ms']:.0f} ms, intake "
            f"{multi['accept_p50_ms']:.0f} ms; CPU ms per included op: standalone "
            f"{standalone['cpu_s_per_1000_ops']:.1f}, intake API "
            f"{1000 * multi['cpu']['api'] / multi['included_ops_per_s']:.1f}; intake cores: "
            f"{cores(multi['cpu'])}",
            flush=True,
        )
    return pairs


def medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over `runs` (a dict of figures, each of its own)."""
    out: dict[str, Any] = {}
    for key, first in runs[0].items():
        if isinstance(first, dict):
            out[key] = medians([run[key] for run in runs])
        elif isinstance(first, int | float):
            out[key] = statistics.median(run[key] for run in runs)
        else:
            out[key] = first
    return out


def rounds_line(pairs: list[tuple[dict[str, Any], dict[str, Any]]], load_before: float) -> str:
    """The accept's medians over the rounds, with each round's ratio."""
    standalone = medians([s for s, _ in pairs])
    multi = medians([m for _, m in pairs])
    accept = standalone["accept_p50_ms"], multi["accept_p50_ms"]
    ratios = sorted(m["accept_p50_ms"] / s["accept_p50_ms"] for s, m in pairs)
    return (
        f"{len(pairs)} rounds, medians: accept p50 standalone {accept[0]:.0f} ms, intake "
        f"{accept[1]:.0f} ms ({accept[1] / accept[0]:.2f}x; each round's ratio "
        f"{', '.join(f'{r:.2f}' for r in ratios)}); send-to-receipt p50 "
        f"{standalone['p50_s']:.2f} s / {multi['p50_s']:.2f} s; included ops/s "
        f"{standalone['included_ops_per_s']:.1f} / {multi['included_ops_per_s']:.1f}; load "
        f"{load_before:.2f} -> {os.getloadavg()[0]:.2f}"
    )


async def main(args: argparse.Namespace) -> list[str]:
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    load_before = os.getloadavg()
    started = datetime.now(UTC)
    if args.api_only:  # the API replicas' table alone, printed
        return [str(r) for r in await api_replicas(args)]
    pairs = await paired_rounds(args)
    accept = rounds_line(pairs, load_before[0])
    if args.bundling_only:
        return [accept]
    standalone = medians([s for s, _ in pairs])
    multi = medians([m for _, m in pairs])
    one = await one_process_bundling(args)
    print("one process:", one, flush=True)
    replicas = await api_replicas(args)
    load_after = os.getloadavg()
    meta = (
        f"Measured at {commit()} on {started:%Y-%m-%d %H:%M} UTC; {machine()}; "
        f"{args.accounts} accounts x {args.ops} ops, {args.executors} executor keys; "
        f"{args.concurrency} connections, {args.seconds:.0f} s per API run. Load average "
        f"(1 min) {load_before[0]:.2f} before, {load_after[0]:.2f} after."
    )
    return [*report(standalone, multi, one, replicas, meta), "", accept]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--accounts", type=int, default=50)
    parser.add_argument("--ops", type=int, default=4)
    parser.add_argument("--executors", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--write-doc", action="store_true")
    parser.add_argument(
        "--bundling-only",
        action="store_true",
        help="run the standalone and `entryway api` (intake) columns alone; print, never write",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="pairs of runs of the standalone and `entryway api` columns; medians",
    )
    parser.add_argument(
        "--api-only", action="store_true", help="run the API replicas' part alone; print only"
    )
    arguments = parser.parse_args()
    table = asyncio.run(main(arguments))
    print("\n".join(table))
    if arguments.write_doc and not (arguments.bundling_only or arguments.api_only):
        write_section(
            "multiprocess",
            "Multi-process path (`make bench-multiprocess`)",
            "Method " + (__doc__ or "").split("Method ", 1)[1].split("Run:")[0],
            table,
        )
