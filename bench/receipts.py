"""What the receipts of one mined bundle cost the process that answers their polls: every
op of an N-op bundle asking for its receipt once, as clients do the moment the block lands.

Method (`bench/receipts.py`): `ReceiptReader.of_bundle`, in this process, against a node
stub that answers at once with one bundle's transaction receipt (BeforeExecution, then per
op one log of its own execution and its UserOperationEvent); the bundle's read is dropped
before each op, as every poll after the block re-reads it (the split of its logs among its
ops stays kept by transaction and block hash). No network and no node: the figure is the
CPU of building the receipts. Best of --repeats runs per bundle size.

Run: `python -m bench.receipts` (prints; the figures are quoted in docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence
from typing import Any

from entryway.bundler.receipts import BEFORE_EXECUTION_EVENT, USER_OP_EVENT, ReceiptReader
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.domain.evm import to_hex

EP = "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108"
TX = "0x" + "ab" * 32
BLOCK = "0x" + "01" * 32
TOKEN = "0x" + "70" * 20
SENDER = "0x" + "00" * 12 + "11" * 20


def bundle_logs(ops: int) -> list[dict[str, Any]]:
    logs = [{"address": EP, "topics": [to_hex(BEFORE_EXECUTION_EVENT)], "data": "0x"}]
    for op in range(1, ops + 1):
        op_hash = to_hex(op.to_bytes(32, "big"))
        logs.append({"address": TOKEN, "topics": [to_hex(b"\x02" * 32)], "data": "0x"})
        # UserOperationEvent(userOpHash, sender, paymaster; nonce, success, cost, gas used)
        data = b"".join(n.to_bytes(32, "big") for n in (op, 1, 7, 7))
        topics = [to_hex(USER_OP_EVENT), op_hash, SENDER, "0x" + "00" * 32]
        logs.append({"address": EP, "topics": topics, "data": to_hex(data)})
    for index, log in enumerate(logs):
        log.update(transactionHash=TX, blockHash=BLOCK, blockNumber="0x5", logIndex=hex(index))
    return logs


class MinedBundle(JsonRpcClient):
    """A node whose head is block 9 and whose one bundle, of `ops` ops, is in block 5."""

    def __init__(self, ops: int) -> None:
        super().__init__("http://127.0.0.1:9")  # never dialled
        self.receipt = {
            "transactionHash": TX,
            "blockHash": BLOCK,
            "blockNumber": "0x5",
            "logs": bundle_logs(ops),
        }

    async def batch(self, calls: Sequence[tuple[str, Sequence[Any]]]) -> list[Any]:
        return ["0x9", self.receipt]


async def every_receipt(ops: int, repeats: int) -> float:
    """Seconds, best of `repeats`, for the receipts of every op of an `ops`-op bundle."""
    best = float("inf")
    for _ in range(repeats):
        reader = ReceiptReader(EthClient(MinedBundle(ops)), EP, 80002, lookback_blocks=100)
        started = time.perf_counter()
        for op in range(1, ops + 1):
            reader._bundle_reads.clear()  # a poll after the block reads the bundle anew
            receipt = await reader.of_bundle(op.to_bytes(32, "big"), TX)
            if receipt is None or len(receipt["logs"]) != 1:
                raise AssertionError(f"op {op}: no receipt, or not its own logs")
        best = min(best, time.perf_counter() - started)
    return best


async def main(args: argparse.Namespace) -> None:
    for ops in args.ops:
        seconds = await every_receipt(ops, args.repeats)
        each = seconds * 1e6 / ops
        print(f"{ops} ops: {seconds * 1000:.1f} ms for every receipt, {each:.0f} µs per op")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, nargs="+", default=[50, 100, 200])
    parser.add_argument("--repeats", type=int, default=5)
    asyncio.run(main(parser.parse_args()))
