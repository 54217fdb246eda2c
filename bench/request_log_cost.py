"""What keeping the request log costs the request path: bench/api.py's metered read served with
the log and without it, alternately, several rounds.

Method (`bench/request_log_cost.py`): for SQLite and then PostgreSQL, a fresh database and one
API process per run (bench/api_server.py, as bench/api.py serves it, metering on), started
with `--request-log on` and `--request-log off` in turn, --rounds times each, so that a drift
of the machine over the minutes falls on both sides alike. Each run asks
`GET /get-sdk-defaults?chainId=80002` (auth, rate limit, chain-access and network checks,
metering, and with the log on, one logged call per request) from this process over
keep-alive connections: --concurrency connections for --seconds (throughput), then one
connection for --seconds (the latency of a request alone), each after a 2 s warm-up. The API
process's CPU (user + system, from /proc) is divided by the requests it answered over both
parts, warm-ups included: what a request costs the server, which the machine's other work
moves less than throughput. The figures are the medians of the rounds; "cost" is with over without.

In process (`--in-process`, the method of the second table): the same app built in this
process (`create_app` over a Store on the same kind of database, metering and the
rate limiter on, the chain's node the devnet's), and `GET /get-sdk-defaults` handed to it as
ASGI calls, one after another, with nothing between (no socket, no HTTP client), the garbage
collector settled as the service's processes settle it: blocks of
--block calls with the recorder and without it in turn, --blocks of each; this process's CPU
per call, the median block of each side. What recording adds to a call is then the
difference, free of the load generator and of the machine's other work.

Run: `python -m bench.request_log_cost` (add `--write-doc` to refresh docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, cast

from bench.api import CHAIN_ID, drop_database, fresh_database, serve, tenant
from bench.docs import write_section
from bench.multiprocess import commit, machine
from bench.processes import cpu_seconds
from bench.rawhttp import drive
from entryway.bundler.rpc_methods import BundlerRpc
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.composition.collector import settle_collector
from entryway.devnet.devnet import Devnet
from entryway.service.app import create_app
from entryway.service.ratelimit import RateLimiter, parse_limits
from entryway.service.services import ChainRuntime, Services
from entryway.storage.engine import make_engine
from entryway.storage.store import Store

SIDES = ("off", "on")
OK = b"HTTP/1.1 200"


def _request(key: str) -> bytes:
    return (
        f"GET /get-sdk-defaults?chainId={CHAIN_ID} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {key}\r\n\r\n"
    ).encode()


async def one_run(url: str, devnet: Devnet, key: str, log: str, args: Any) -> dict[str, float]:
    proc, base = await serve(url, devnet, "on", log)
    request = _request(key)
    try:
        before = cpu_seconds(proc.pid)
        busy = await drive(
            base, lambda: request, ok=OK, concurrency=args.concurrency, seconds=args.seconds
        )
        alone = await drive(base, lambda: request, ok=OK, concurrency=1, seconds=args.seconds)
        used = cpu_seconds(proc.pid) - before
    finally:
        proc.terminate()
        await proc.wait()
    answered = sum(len(run.latencies) + run.warm_requests for run in (busy, alone))
    return {
        "rps": len(busy.latencies) / busy.elapsed,
        "p50_ms": 1000 * statistics.median(alone.latencies),
        "cpu_us": 1e6 * used / answered,  # warm-ups on both sides of the division
        "errors": busy.errors + alone.errors,
    }


async def asgi_calls(app: Any, key: str, count: int) -> None:
    """`count` metered reads handed to `app` directly; each must answer 200."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "scheme": "http", "path": "/get-sdk-defaults", "raw_path": b"/get-sdk-defaults",
        "query_string": f"chainId={CHAIN_ID}".encode(), "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), (b"authorization", f"Bearer {key}".encode())],
        "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000),
    }  # fmt: skip
    request: dict[str, Any] = {"type": "http.request", "body": b"", "more_body": False}
    statuses: list[int] = []

    async def receive() -> dict[str, Any]:
        return request

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    for _ in range(count):
        await app(dict(scope), receive, send)
    if set(statuses) != {200}:
        raise RuntimeError(f"the read answered {sorted(set(statuses))}")


async def in_process(kind: str, url: str, devnet: Devnet, key: str, args: Any) -> str:
    engine = make_engine(url)
    services = Services()
    limiter = RateLimiter(parse_limits("FREE=1000000/second"))
    platform = services.attach(Store(engine), limiter=limiter, metering=True)
    await platform.meter.start()
    recorder = services.request_log
    chain = devnet.chains[0]
    per_call: dict[str, list[float]] = {side: [] for side in SIDES}
    try:
        async with JsonRpcClient(chain.rpc_url) as rpc:
            services.chains[CHAIN_ID] = ChainRuntime(
                CHAIN_ID, chain.rpc_url, chain.deployment, cast(BundlerRpc, None), EthClient(rpc)
            )
            app = create_app(services)
            await asgi_calls(app, key, args.block)  # warm-up: caches, the node's health
            settle_collector()  # as every service process does once started
            for _ in range(args.blocks):
                for side in SIDES:
                    services.request_log = recorder if side == "on" else None
                    started = time.process_time()
                    await asgi_calls(app, key, args.block)
                    per_call[side].append(1e6 * (time.process_time() - started) / args.block)
                    if recorder is not None:
                        await recorder.flush()  # as its writer does every second
    finally:
        await platform.meter.stop()
        await limiter.aclose()
        await engine.dispose()
    off, on = (statistics.median(per_call[side]) for side in SIDES)
    added = f"{on - off:+.1f} µs ({100 * (on / off - 1):+.1f}%)"
    return f"| {kind} | {off:.1f} µs | {on:.1f} µs | {added} |"


async def main(args: argparse.Namespace) -> list[str]:
    load_before = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        async with Devnet(Path(tmp), [CHAIN_ID], base_port=0) as devnet:
            for kind in args.databases.split(","):
                url, name = await fresh_database(kind, Path(tmp))
                runs: dict[str, list[dict[str, float]]] = {side: [] for side in SIDES}
                try:
                    _, key = await tenant(url)
                    if args.in_process:
                        rows.append(await in_process(kind, url, devnet, key, args))
                        print(rows[-1], flush=True)
                        continue
                    for _ in range(args.rounds):
                        for side in SIDES:
                            runs[side].append(await one_run(url, devnet, key, side, args))
                            print(kind, side, runs[side][-1], flush=True)
                finally:
                    await drop_database(name)
                if not args.in_process:
                    rows.append(_row(kind, runs))
    load_after = os.getloadavg()[0]
    if args.in_process:
        return [
            f"In process, measured at {commit()}; {machine()}; {args.blocks} blocks of "
            f"{args.block} calls on each side. Load average (1 min) {load_before:.2f} before, "
            f"{load_after:.2f} after.",
            "",
            "| database | CPU per call, without the log | with it | recording adds |",
            "|---|---|---|---|",
            *rows,
        ]
    return [
        f"Measured at {commit()}; {machine()}; {args.rounds} rounds, {args.seconds:.0f} s per "
        f"part, {args.concurrency} connections. Load average (1 min) {load_before:.2f} before, "
        f"{load_after:.2f} after.",
        "",
        "| database | requests/s, 32 connections: without → with | p50 ms, one connection | "
        "API CPU per request | spread of the rounds (requests/s, lowest to highest) | errors |",
        "|---|---|---|---|---|---|",
        *rows,
    ]


def _row(kind: str, runs: dict[str, list[dict[str, float]]]) -> str:
    def median(side: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[side])

    def change(key: str) -> str:
        return f"{100 * (median('on', key) / median('off', key) - 1):+.1f}%"

    rates = {side: [r["rps"] for r in runs[side]] for side in SIDES}
    spread = "; ".join(f"{s} {min(rates[s]):,.0f} to {max(rates[s]):,.0f}" for s in SIDES)
    errors = sum(int(r["errors"]) for side in SIDES for r in runs[side])
    return (
        f"| {kind} | {median('off', 'rps'):,.0f} → {median('on', 'rps'):,.0f} ({change('rps')}) "
        f"| {median('off', 'p50_ms'):.2f} → {median('on', 'p50_ms'):.2f} ({change('p50_ms')}) "
        f"| {median('off', 'cpu_us'):.0f} → {median('on', 'cpu_us'):.0f} µs "
        f"({change('cpu_us')}) | {spread} | {errors} |"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=6)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--databases", default="sqlite,postgresql", help="comma-separated")
    parser.add_argument("--in-process", action="store_true", help="ASGI calls in this process")
    parser.add_argument("--blocks", type=int, default=15)
    parser.add_argument("--block", type=int, default=2000)
    parser.add_argument("--write-doc", action="store_true")
    arguments = parser.parse_args()
    table = asyncio.run(main(arguments))
    print("\n".join(table))
    if arguments.write_doc:
        write_section(
            "request-log-cost",
            "The request log's cost (`python -m bench.request_log_cost`)",
            "Method " + (__doc__ or "").split("Method ", 1)[1].split("Run:")[0],
            table,
        )
