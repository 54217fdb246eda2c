"""API benchmark: a metered read endpoint under load, with metering on and off, on SQLite and
on PostgreSQL; and the ledger's metered write (one charge: usage event + FIFO postings).

Method (docs/benchmarks.md): the API runs as its own uvicorn process (bench/api_server.py,
one event loop, uvloop and httptools, as `entryway up` serves it) on a fresh database, with
one chain whose RPC is an anvil devnet. The load comes from this process over keep-alive
connections, with a minimal HTTP/1.1 client (httpx costs more CPU per request than the
server does, and would be what we measured), asking `GET /get-sdk-defaults?chainId=80002`
with one API key: auth, rate limit, chain-access and network checks, metering. Throughput
runs use --concurrency connections; the latency of one request alone (and so the cost of
metering: the p50 difference with metering on and off) comes from one connection. Each run
lasts --seconds after a 2 s warm-up. The metered write is `Meter.charge` in-process (a
unique idempotency key each), one at a time and 32 at once; over HTTP it is measured by
bench/notary_api.py (one notarization = one charge).

Run: `python -m bench.api` (add `--write-doc` to refresh docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

import asyncpg
import httpx

from bench.docs import write_section
from bench.rawhttp import drive
from entryway.devnet.anvil import free_port
from entryway.devnet.devnet import Devnet
from entryway.domain.apikeys import KeyEnvironment
from entryway.domain.plans import PlanName
from entryway.domain.pricebook import OperationType, Quote, default_price_book
from entryway.service.metering import Meter
from entryway.storage.billing import Billing
from entryway.storage.engine import make_engine, migrate, sqlite_url
from entryway.storage.store import Caller, Store

CHAIN_ID = 80002
POSTGRES = os.environ.get("ENTRYWAY_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


async def fresh_database(kind: str, tmp: Path) -> tuple[str, str | None]:
    if kind == "sqlite":
        folder = tmp / secrets.token_hex(4)
        folder.mkdir()
        return sqlite_url(folder), None
    admin = await asyncpg.connect(POSTGRES)
    name = f"bench_{secrets.token_hex(4)}"
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    return f"{POSTGRES.rsplit('/', 1)[0]}/{name}", name


async def drop_database(name: str | None) -> None:
    if name:
        admin = await asyncpg.connect(POSTGRES)
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        await admin.close()


async def tenant(url: str) -> tuple[str, str]:
    engine = make_engine(url)
    await migrate(engine)
    store = Store(engine)
    now = datetime.now(UTC)
    owner = await store.create_user(f"bench-{now.timestamp()}@example.org", now)
    pid = await store.create_project(owner, "bench", PlanName.FREE, [CHAIN_ID], now)
    key = await store.issue_key(pid, KeyEnvironment.TEST, [CHAIN_ID], now)
    await engine.dispose()
    return pid, key.secret


async def load(base: str, key: str, concurrency: int, seconds: float) -> dict[str, float]:
    host = base.removeprefix("http://").split(":")[0]
    request = (
        f"GET /get-sdk-defaults?chainId={CHAIN_ID} HTTP/1.1\r\nHost: {host}\r\n"
        f"Authorization: Bearer {key}\r\n\r\n"
    ).encode()
    run = await drive(
        base, lambda: request, ok=b"HTTP/1.1 200", concurrency=concurrency, seconds=seconds
    )
    ordered = sorted(run.latencies)
    return {
        "rps": len(ordered) / run.elapsed,
        "p50_ms": 1000 * statistics.median(ordered),
        "p99_ms": 1000 * ordered[int(len(ordered) * 0.99)],
        "errors": run.errors,
    }


async def serve(
    url: str, devnet: Devnet, metering: str, request_log: str = "on"
) -> tuple[asyncio.subprocess.Process, str]:
    chain = devnet.chains[0]
    port = free_port()
    deployment = json.dumps(asdict(chain.deployment))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.api_server", "--database-url", url,
        "--rpc-url", chain.rpc_url, "--chain-id", str(CHAIN_ID), "--deployment", deployment,
        "--port", str(port), "--metering", metering, "--request-log", request_log,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient() as http:
        for _ in range(200):
            try:
                await http.get(f"{base}/healthz")
                return proc, base
            except httpx.HTTPError:
                await asyncio.sleep(0.1)
    raise RuntimeError("the API did not start")


async def metered_writes(url: str, pid: str, key_id: str) -> dict[str, float]:
    """Charges through the meter, as the API makes them: one at a time, then 32 at once
    (group commit: concurrent charges share a transaction)."""
    engine = make_engine(url)
    store = Store(engine)
    meter = Meter(store, Billing(engine), default_price_book())
    who = Caller(key_id, pid, KeyEnvironment.TEST, frozenset(), frozenset(), True, PlanName.FREE)
    quote = Quote.of(OperationType.NOTARIZATION, service=1)
    n = 1_000
    t0 = time.perf_counter()
    for i in range(n // 2):
        await meter.charge(who, quote, f"seq-{i}", endpoint="bench")
    sequential = (n // 2) / (time.perf_counter() - t0)
    sem = asyncio.Semaphore(32)

    async def one(i: int) -> None:
        async with sem:
            await meter.charge(who, quote, f"par-{i}", endpoint="bench")

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    concurrent = n / (time.perf_counter() - t0)
    await engine.dispose()
    return {"sequential": sequential, "concurrent32": concurrent}


async def main(args: argparse.Namespace) -> list[str]:
    rows, writes = [], []
    with tempfile.TemporaryDirectory() as tmp:
        async with Devnet(Path(tmp), [CHAIN_ID], base_port=0) as devnet:
            for kind in ("sqlite", "postgresql"):
                url, name = await fresh_database(kind, Path(tmp))
                try:
                    pid, key = await tenant(url)
                    results = {}
                    for metering in ("off", "on"):
                        proc, base = await serve(url, devnet, metering)
                        try:
                            for conns in (1, args.concurrency):
                                r = await load(base, key, conns, args.seconds)
                                results[(metering, conns)] = r
                                rows.append(
                                    f"| {kind} | {metering} | {conns} | {r['rps']:,.0f} | "
                                    f"{r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {int(r['errors'])} |"
                                )
                                print(rows[-1], flush=True)
                        finally:
                            proc.terminate()
                            await proc.wait()
                    cost = results[("on", 1)]["p50_ms"] - results[("off", 1)]["p50_ms"]
                    rows.append(
                        f"| {kind} | cost of metering, p50 of one request | | | "
                        f"{cost * 1000:+.0f} µs | | |"
                    )
                    w = await metered_writes(url, pid, key.split("_")[2])
                    writes.append(f"| {kind} | {w['sequential']:,.0f} | {w['concurrent32']:,.0f} |")
                    print(writes[-1], flush=True)
                finally:
                    await drop_database(name)
    return [
        f"{args.seconds:.0f} s per run after a 2 s warm-up.",
        "",
        "| database | metering | connections | requests/s | p50 ms | p99 ms | errors |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        "Metered write (`Meter.charge`: a usage event and its FIFO lot postings; concurrent",
        "charges share a transaction):",
        "",
        "| database | charges/s, one at a time | charges/s, 32 concurrent |",
        "|---|---|---|",
        *writes,
    ]


def write_doc(lines: list[str]) -> None:
    write_section("api", "API", (__doc__ or "").split("Run:")[0], lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--write-doc", action="store_true")
    arguments = parser.parse_args()
    table = asyncio.run(main(arguments))
    print("\n".join(table))
    if arguments.write_doc:
        write_doc(table)
