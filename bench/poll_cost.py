"""What one receipt poll costs the process that answers it: `entryway api` (intake) against
the standalone bundler.

Method (`bench/poll_cost.py`): the cluster of bench/processes.py (a plain anvil, Entryway
deployed, a fresh PostgreSQL database, Redis, one `entryway api --config` replica), and on
the same anvil a standalone `entryway bundler --rpc-url` with one funded executor key. One
op is open in the intake (its row written straight to the database, received "now", so the
API answers from the row, as it does for an op it has just accepted); the standalone is
asked for a hash it has never seen (it answers from its mempool and, missing there, from the
EntryPoint's logs: the node's work, not the bundler's CPU, is what that adds). Each side gets
`eth_getUserOperationReceipt` from this process over --concurrency keep-alive connections
for --seconds after a 2 s warm-up (bench/rawhttp.py), --rounds times in turn; the serving
process's CPU (user + system, from /proc) is divided by the polls it answered, warm-ups
included. Medians of the rounds.

Run: `python -m bench.poll_cost` (prints; the figures are quoted in docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
from pathlib import Path

import asyncpg
import httpx
from eth_account import Account

from bench.multiprocess import commit, machine
from bench.processes import Cluster, cpu_seconds
from bench.rawhttp import drive
from entryway.devnet.anvil import free_port

CHAIN_ID = 80002
OPEN_OP = "0x" + "ab" * 32
UNSEEN_OP = "0x" + "cd" * 32


def poll(path: str, op_hash: str) -> bytes:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "eth_getUserOperationReceipt", "params": [op_hash]}
    ).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def cost(pid: int, base: str, request: bytes, args: argparse.Namespace) -> float:
    """CPU microseconds per poll of the process `pid`."""
    before = cpu_seconds(pid)
    run = await drive(
        base, lambda: request, ok=b"HTTP/1.1 200", concurrency=args.concurrency,
        seconds=args.seconds,
    )  # fmt: skip
    if run.errors:
        raise RuntimeError(f"{run.errors} polls were not answered 200")
    return 1e6 * (cpu_seconds(pid) - before) / (len(run.latencies) + run.warm_requests)


async def open_op(cluster: Cluster) -> None:
    db = await asyncpg.connect(cluster.database_url)
    try:
        await db.execute(
            "INSERT INTO op_intake (chain_id, user_op_hash, entry_point, sender, nonce, user_op,"
            " state, received_at, updated_at) VALUES ($1, $2, $3, $4, '0', '{}', 'pending',"
            " now() + interval '1 hour', now())",
            CHAIN_ID, OPEN_OP, cluster.entry_point, "0x" + "11" * 20,
        )  # fmt: skip
    finally:
        await db.close()


async def standalone(cluster: Cluster, root: Path) -> str:
    executor = Account.create()
    async with httpx.AsyncClient() as http:
        funding = [executor.address, hex(10**21)]
        body = {"jsonrpc": "2.0", "id": 1, "method": "anvil_setBalance", "params": funding}
        await http.post(cluster.rpc_url, json=body)
    key_file = root / "standalone-executor.key"
    key_file.write_text(executor.key.hex() + "\n")
    port = free_port()
    proc = await cluster.spawn(
        "standalone", "bundler", "--rpc-url", cluster.rpc_url, "--executor-key-file",
        str(key_file), "--port", str(port), "--entry-point", cluster.entry_point,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    chain_id = {"jsonrpc": "2.0", "id": 1, "method": "eth_chainId"}
    await cluster.until(lambda http: http.post(f"{base}/rpc", json=chain_id), proc)
    return base


async def main(args: argparse.Namespace) -> list[str]:
    costs: dict[str, list[float]] = {"api": [], "standalone": []}
    with tempfile.TemporaryDirectory() as tmp:
        async with Cluster(Path(tmp), CHAIN_ID, 1.0) as cluster:
            api = await cluster.api("api")
            await open_op(cluster)
            bundler = await standalone(cluster, Path(tmp))
            api_poll = poll(f"/rpc/{CHAIN_ID}?apikey={cluster.api_key}", OPEN_OP)
            bundler_poll = poll("/rpc", UNSEEN_OP)
            for _ in range(args.rounds):
                costs["api"].append(await cost(cluster.procs["api"].pid, api, api_poll, args))
                costs["standalone"].append(
                    await cost(cluster.procs["standalone"].pid, bundler, bundler_poll, args)
                )
                print({k: f"{v[-1]:.0f} µs" for k, v in costs.items()}, flush=True)
    api_us, bundler_us = (statistics.median(costs[k]) for k in ("api", "standalone"))
    return [
        f"Measured at {commit()}; {machine()}; {args.rounds} rounds, {args.seconds:.0f} s, "
        f"{args.concurrency} connections. CPU per receipt poll, medians: `entryway api` "
        f"{api_us:.0f} µs, standalone bundler {bundler_us:.0f} µs ({api_us / bundler_us:.2f}x)."
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--concurrency", type=int, default=32)
    print("\n".join(asyncio.run(main(parser.parse_args()))))
