"""Notarization service benchmark: hashes accepted per second through the API (one hash per
request, and 1,000 per bulk request), and the time to seal, anchor and hand out the proofs of
a 10,000- and a 100,000-leaf batch.

Method (docs/benchmarks.md): intake runs against the API as its own uvicorn process
(bench/notary_api_server.py: uvloop and httptools, with the batcher and a worker anchoring
on an anvil devnet in the same process, as `entryway up` runs them) on a fresh SQLite
database (and PostgreSQL with --postgres). Load comes from this process over keep-alive
connections with a minimal HTTP/1.1 client, as bench/api.py does (httpx costs more CPU per
request than the server does): `POST /v1/notarizations` with a fresh random hash per request
at --concurrency connections, then `POST /v1/notarizations/bulk` with 1,000 fresh hashes per
request at --bulk-concurrency connections; every request authenticated, chain-checked and
charged (one usage event per request). Each run lasts --seconds after a 2 s warm-up; then
the time until the last accepted hash is anchored is measured. Batches: in this process, on
a fresh database per size, the hashes are written pending (through `NotaryStore.submit`, in
requests of 1,000), then timed: sealing (one transaction: batch, leaves, task), the anchoring
task (`AnchorBatchHandler`: leaves read, tree built, NotaryAnchor.anchor sent and mined,
anchor recorded, one `notarization.anchored` event per 1,000 notarizations to a subscribed
endpoint), and the first proof through `Notary.proof` (the tree rebuilt from the stored
leaves); then notarizations read with their proofs (`Notary.get` + `Notary.proof`)
per second once the tree is cached.

Run: `python -m bench.notary_api` (add `--write-doc` to refresh docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from bench.api import drop_database, fresh_database, tenant
from bench.docs import write_section
from bench.rawhttp import drive
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.chain.transactor import Transactor
from entryway.devnet.anvil import free_port
from entryway.devnet.devnet import Devnet
from entryway.domain.notarization import ANCHOR_TASK, HASH_BYTES, NewNotarization, NotarizationMode
from entryway.notary.anchor import Anchorer
from entryway.notary.anchoring import AnchorBatchHandler
from entryway.notary.service import Notary
from entryway.storage.engine import make_engine
from entryway.storage.notary import NotaryStore
from entryway.storage.schema import notarizations, notary_batches
from entryway.storage.secret_box import SecretBox
from entryway.storage.webhooks import WebhookStore

CHAIN_ID = 80002
BULK = 1_000


def _hashes(n: int) -> list[str]:
    return ["0x" + os.urandom(HASH_BYTES).hex() for _ in range(n)]


def _post(host: str, path: str, key: str, body: bytes) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def _single(host: str, key: str) -> bytes:
    body = json.dumps({"chainId": CHAIN_ID, "documentHash": _hashes(1)[0]}).encode()
    return _post(host, "/v1/notarizations", key, body)


def _bulk(host: str, key: str) -> bytes:
    items = [{"documentHash": h} for h in _hashes(BULK)]
    return _post(
        host,
        "/v1/notarizations/bulk",
        key,
        json.dumps({"chainId": CHAIN_ID, "items": items}).encode(),
    )


async def load(
    base: str, key: str, make: str, concurrency: int, seconds: float
) -> dict[str, float]:
    """Fresh hashes each request: one per request, or BULK with make="bulk"."""
    host = base.removeprefix("http://").split(":")[0]
    build = _bulk if make == "bulk" else _single
    run = await drive(
        base,
        lambda: build(host, key),
        ok=b"HTTP/1.1 202",
        concurrency=concurrency,
        seconds=seconds,
    )
    per_request = BULK if make == "bulk" else 1
    return {
        "requests": run.warm_requests + len(run.latencies),
        "hashes_per_s": per_request * (len(run.latencies) - run.errors) / run.elapsed,
        "p50_ms": 1000 * statistics.median(run.latencies),
        "errors": run.errors,
    }


async def serve(url: str, devnet: Devnet) -> tuple[asyncio.subprocess.Process, str]:
    chain = devnet.chains[0]
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.notary_api_server", "--database-url", url,
        "--rpc-url", chain.rpc_url, "--chain-id", str(CHAIN_ID),
        "--notary", chain.deployment.notary,
        "--notary-key-file", str(devnet.dir / "keys" / "notary-submitter.key"),
        "--port", str(port),
        "--settings", json.dumps({"batch_size": 10_000, "batch_interval": 10.0}),
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


async def _until_anchored(url: str, limit_s: float = 120.0) -> float:
    """Seconds until no accepted hash is waiting for a batch or for its anchor."""
    engine = make_engine(url)
    store = NotaryStore(engine)
    started = time.perf_counter()
    try:
        while time.perf_counter() - started < limit_s:
            if (await store.pending(CHAIN_ID, 1)).count == 0 and not await _unanchored(engine):
                return time.perf_counter() - started
            await asyncio.sleep(0.2)
    finally:
        await engine.dispose()
    return float("nan")


async def _unanchored(engine: AsyncEngine) -> bool:
    async with engine.connect() as db:
        state = await db.scalar(
            select(notary_batches.c.batch_id).where(notary_batches.c.state == "sealed").limit(1)
        )
    return state is not None


async def intake(kind: str, devnet: Devnet, tmp: Path, args: argparse.Namespace) -> list[str]:
    url, name = await fresh_database(kind, tmp)
    rows = []
    try:
        _, key = await tenant(url)
        proc, base = await serve(url, devnet)
        try:
            for make, conns in (("single", args.concurrency), ("bulk", args.bulk_concurrency)):
                r = await load(base, key, make, conns, args.seconds)
                drained = await _until_anchored(url)
                rows.append(
                    f"| {kind} | {make} ({1 if make == 'single' else BULK} per request) | {conns} "
                    f"| {r['hashes_per_s']:,.0f} | {r['p50_ms']:.1f} | {int(r['errors'])} "
                    f"| {drained:.1f} s |"
                )
                print(rows[-1], flush=True)
        finally:
            proc.terminate()
            await proc.wait()
    finally:
        await drop_database(name)
    return rows


async def batch(kind: str, leaves: int, devnet: Devnet, anchorer: Anchorer, tmp: Path) -> str:
    url, name = await fresh_database(kind, tmp)
    try:
        project_id, _ = await tenant(url)
        engine = make_engine(url)
        store = NotaryStore(engine)
        webhooks = WebhookStore(engine, secrets=SecretBox.generate())
        await webhooks.create_endpoint(
            project_id, "https://hooks.example.org/n", ["notarization.anchored"]
        )
        started = time.perf_counter()
        for start in range(0, leaves, BULK):
            items = [
                NewNotarization(os.urandom(HASH_BYTES), HASH_BYTES)
                for _ in range(min(BULK, leaves - start))
            ]
            key = f"r{start}"
            await store.submit(
                project_id, None, CHAIN_ID, NotarizationMode.BATCHED, items, key, digest=key
            )
        written = time.perf_counter() - started
        t0 = time.perf_counter()
        sealed = await store.seal(CHAIN_ID, leaves)
        t1 = time.perf_counter()
        assert sealed is not None and sealed.leaf_count == leaves
        [task] = await store.queue.claim("bench", [ANCHOR_TASK], lease_seconds=600)
        outcome = await AnchorBatchHandler(store, {CHAIN_ID: anchorer}, webhooks)(task)
        t2 = time.perf_counter()
        assert outcome["state"] == "anchored"
        notary = Notary(store, [CHAIN_ID])
        ids = await _some_ids(engine, sealed.batch_id, 1_000)
        first = await notary.get(project_id, ids[0])
        assert first is not None and await notary.proof(first) is not None
        t3 = time.perf_counter()
        for notarization_id in ids[1:]:
            found = await notary.get(project_id, notarization_id)
            assert found is not None and await notary.proof(found) is not None
        per_second = (len(ids) - 1) / (time.perf_counter() - t3)
        await engine.dispose()
        return (
            f"| {kind} | {leaves:,} | {leaves / written:,.0f}/s | {1000 * (t1 - t0):,.0f} ms "
            f"| {1000 * (t2 - t1):,.0f} ms | {1000 * (t3 - t2):,.0f} ms | **{t3 - t0:.2f} s** "
            f"| {per_second:,.0f} |"
        )
    finally:
        await drop_database(name)


async def _some_ids(engine: AsyncEngine, batch_id: str, n: int) -> list[str]:
    async with engine.connect() as db:
        rows = await db.execute(
            select(notarizations.c.notarization_id)
            .where(notarizations.c.batch_id == batch_id)
            .limit(n)
        )
        return [r for (r,) in rows]


async def main(args: argparse.Namespace) -> list[str]:
    intake_rows: list[str] = []
    batch_rows: list[str] = []
    kinds = ["sqlite", "postgresql"] if args.postgres else ["sqlite"]
    with tempfile.TemporaryDirectory() as tmp:
        async with Devnet(Path(tmp), [CHAIN_ID], base_port=0) as devnet:
            for kind in kinds:
                intake_rows += await intake(kind, devnet, Path(tmp), args)
            chain = devnet.chains[0]
            async with JsonRpcClient(chain.rpc_url) as rpc:
                submitter = Transactor(EthClient(rpc), devnet.keys.notary_submitter, CHAIN_ID)
                anchorer = Anchorer(submitter, chain.deployment.notary)
                for kind in ("sqlite", "postgresql"):
                    for leaves in (10_000, 100_000):
                        batch_rows.append(await batch(kind, leaves, devnet, anchorer, Path(tmp)))
                        print(batch_rows[-1], flush=True)
    return [
        f"Intake: {args.seconds:.0f} s per run after a 2 s warm-up; "
        "batches sealed at 10,000 hashes or every 10 s.",
        "",
        "| database | requests | connections | hashes accepted/s | p50 ms | errors "
        "| then all anchored in |",
        "|---|---|---|---|---|---|---|",
        *intake_rows,
        "",
        "| database | leaves | written pending (in-process, 1,000 per request) | sealed | "
        "anchoring task | first proof (tree rebuilt) | sealed → anchored → first proof | "
        "notarizations read with their proof/s after |",
        "|---|---|---|---|---|---|---|---|",
        *batch_rows,
    ]


def write_doc(lines: list[str]) -> None:
    write_section(
        "notary-api",
        "Notarization service (`python -m bench.notary_api --write-doc`)",
        (__doc__ or "").split("Method (docs/benchmarks.md): ")[1].split("Run:")[0],
        lines,
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--bulk-concurrency", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--postgres", action="store_true", help="intake on PostgreSQL too")
    parser.add_argument("--write-doc", action="store_true")
    arguments = parser.parse_args()
    table = asyncio.run(main(arguments))
    print("\n".join(table))
    if arguments.write_doc:
        write_doc(table)
