"""The bundler benchmark's capacity figures and its open-loop mode.

- `ProcessClock`: CPU seconds a process (the bundler's, the node's) spent, read from /proc.
- `block_shares`: how much of their blocks' gas limit the bundles that carried some ops used,
  per bundle and per block (several bundles may share a block).
- `open_loop`: ops arrive at a fixed rate, whatever became of the earlier ones, from accounts
  taken in turn; the rate is stepped up until the median send-to-receipt passes two block
  times (or the last step is run). Each step's figures are reported.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections import defaultdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench.bundler import Bench

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class ProcessClock:
    """CPU seconds (user + system) of process `pid` since `start()`."""

    def __init__(self, pid: int | None) -> None:
        self.pid = pid
        self._at = 0.0

    def _now(self) -> float:
        if self.pid is None:
            return 0.0
        with open(f"/proc/{self.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime

    def start(self) -> None:
        self._at = self._now()

    def seconds(self) -> float:
        return self._now() - self._at


def node_pid() -> int | None:
    """The pid of the anvil this process started (the devnet's node), if there is one."""
    mine = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/comm") as comm:
                if comm.read().strip() != "anvil":
                    continue
        except OSError:
            continue
        pid = int(entry)
        while pid > 1:  # up its ancestors to this process, or to init
            pid = _parent(pid)
            if pid == mine:
                return int(entry)
    return None


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("PPid:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def load_average() -> float:
    return os.getloadavg()[0]


async def block_shares(bench: Bench, op_hashes: list[str]) -> dict[str, float]:
    """Per bundle and per block: gas used by the bundles over the block's gas limit."""
    bundles: dict[str, tuple[int, int]] = {}  # tx hash -> (block, gas used)
    for h in op_hashes:
        tx = (await bench.receipt(h))["receipt"]
        bundles[tx["transactionHash"]] = (int(tx["blockNumber"], 16), int(tx["gasUsed"], 16))
    per_block: dict[int, int] = defaultdict(int)
    for block, gas in bundles.values():
        per_block[block] += gas
    limits = {}
    for block in per_block:
        limits[block] = int((await bench.eth.get_block(hex(block)))["gasLimit"], 16)
    return {
        "bundle_block_gas_share": statistics.mean(g / limits[b] for b, g in bundles.values()),
        "block_gas_share": statistics.mean(g / limits[b] for b, g in per_block.items()),
        "bundles_per_block": len(bundles) / len(per_block),
    }


async def open_loop(
    bench: Bench,
    accounts: list[tuple[Any, str]],
    rates: list[int],
    step_s: float,
    block_time_s: float,
) -> list[dict[str, float]]:
    """Each rate of `rates` (ops/s) for `step_s` seconds, stopping after the first whose p50
    send-to-receipt passes two block times. Nonces continue across steps."""
    nonces = {sender: 1 for _, sender in accounts}
    steps = []
    for rate in rates:
        step = await _open_loop_step(bench, accounts, nonces, rate, step_s)
        steps.append(step)
        if step["p50_s"] > 2 * block_time_s:
            break
    return steps


async def _open_loop_step(
    bench: Bench,
    accounts: list[tuple[Any, str]],
    nonces: dict[str, int],
    rate: int,
    step_s: float,
) -> dict[str, float]:
    latencies: list[float] = []
    hashes: list[str] = []
    refused = 0

    async def one(owner: Any, sender: str, nonce: int) -> None:
        nonlocal refused
        op = await bench.op(owner, sender, nonce, False)
        start = time.monotonic()
        try:
            op_hash = await bench.send(op)
        except Exception:
            refused += 1
            return
        receipt = await bench.receipt(op_hash, within_s=120)
        assert receipt["success"], receipt
        latencies.append(time.monotonic() - start)
        hashes.append(op_hash)

    clock = ProcessClock(bench.process_pid)
    clock.start()
    tasks = []
    began = time.monotonic()
    for i in range(int(rate * step_s)):
        await asyncio.sleep(max(began + i / rate - time.monotonic(), 0))
        owner, sender = accounts[i % len(accounts)]
        tasks.append(asyncio.create_task(one(owner, sender, nonces[sender])))
        nonces[sender] += 1
    await asyncio.gather(*tasks)
    elapsed = time.monotonic() - began
    return {
        "offered_ops_per_s": float(rate),
        "included_ops_per_s": len(hashes) / elapsed,
        "refused": float(refused),
        "p50_s": statistics.median(latencies),
        "p95_s": sorted(latencies)[int(0.95 * (len(latencies) - 1))],
        "cpu_s_per_1000_ops": clock.seconds() / len(hashes) * 1000,
        "load_average": load_average(),
        **await block_shares(bench, hashes),
    }
