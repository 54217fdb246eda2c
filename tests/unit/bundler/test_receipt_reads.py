"""Receipts of a bundle's ops read the bundle transaction's receipt once, and only for the
block its logs name: a reorg that moves the bundle is never answered from the old block."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from entryway.bundler.receipts import USER_OP_EVENT, ReceiptReader
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.domain.evm import to_hex

EP = "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108"
TX = "0x" + "ab" * 32
SENDER = "0x" + "11" * 20


def event_log(op: int, block_hash: str) -> dict[str, Any]:
    # UserOperationEvent(userOpHash, sender, paymaster, nonce, success, gasCost, gasUsed)
    data = (op).to_bytes(32, "big") + (1).to_bytes(32, "big") + (7).to_bytes(32, "big") * 2
    return {
        "address": EP,
        "topics": [
            to_hex(USER_OP_EVENT),
            to_hex(op.to_bytes(32, "big")),
            "0x" + "00" * 12 + SENDER[2:],
            "0x" + "00" * 32,
        ],
        "data": to_hex(data),
        "transactionHash": TX,
        "blockHash": block_hash,
        "blockNumber": "0x5",
        "logIndex": hex(op),
    }


class Node(JsonRpcClient):
    """A chain whose one bundle carries ops 1..n in the block `block_hash`."""

    def __init__(self, ops: int) -> None:
        super().__init__("http://127.0.0.1:9")
        self.block_hash = "0x" + "01" * 32
        self.ops = ops
        self.calls: list[str] = []

    def answer(self, method: str, params: Sequence[Any]) -> Any:
        self.calls.append(method)
        if method == "eth_blockNumber":
            return "0x9"
        if method == "eth_getLogs":
            op = int(params[0]["topics"][1], 16)
            return [event_log(op, self.block_hash)] if op <= self.ops else []
        assert method == "eth_getTransactionReceipt"
        logs = [event_log(op, self.block_hash) for op in range(1, self.ops + 1)]
        return {
            "transactionHash": TX,
            "blockHash": self.block_hash,
            "blockNumber": "0x5",
            "logs": logs,
        }

    async def request(
        self, method: str, params: Sequence[Any] = (), *, deadline_s: float | None = None
    ) -> Any:
        return self.answer(method, params)

    async def batch(self, calls: Sequence[tuple[str, Sequence[Any]]]) -> list[Any]:
        return [self.answer(m, p) for m, p in calls]


async def test_a_bundles_ops_share_one_read_of_its_receipt_until_its_block_changes() -> None:
    node = Node(ops=5)
    reader = ReceiptReader(EthClient(node), EP, 80002, lookback_blocks=100)
    receipts = [await reader.receipt(op.to_bytes(32, "big")) for op in range(1, 6)]
    assert [r["userOpHash"] for r in receipts if r] == [
        to_hex(op.to_bytes(32, "big")) for op in range(1, 6)
    ]
    assert all(r is not None and r["confirmations"] == "0x5" for r in receipts)
    assert node.calls.count("eth_getTransactionReceipt") == 1
    assert node.calls.count("eth_getLogs") == 5  # each answer still starts from the chain

    node.block_hash = "0x" + "02" * 32  # a reorg put the bundle in another block
    moved = await reader.receipt((3).to_bytes(32, "big"))
    assert moved is not None and moved["receipt"]["blockHash"] == node.block_hash
    assert node.calls.count("eth_getTransactionReceipt") == 2

    node.ops = 2  # and a later one dropped it from the chain
    assert await reader.receipt((3).to_bytes(32, "big")) is None
