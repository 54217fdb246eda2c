"""UserOperation receipts and lookups, read from the chain's UserOperationEvent logs.

Every answer starts from the node's canonical chain, so a receipt whose block was dropped
by a reorg disappears with it. Two reads are shared rather than repeated per op:

- an op this bundler saw mined in its own bundle is read off that bundle's transaction
  receipt (`of_bundle`), with no log search; so is an op whose bundle another process sent
  and said so (the intake's leader), mined or not yet. Clients poll the moment a block
  lands: the polls of one bundle's ops share a read of its receipt and the head while it is
  under way, and a read that found the bundle not mined answers them all for
  BUNDLE_READ_REUSE_S after;
- any other op is found by its UserOperationEvent log (the head and the log search in one
  batch; on a node that caps log queries, in pages back from the head), and its bundle's
  transaction receipt is kept under the block hash the log names: a bundle of 100 ops has
  one receipt of several hundred logs, and a receipt under a given block hash never
  changes.

A bundle's logs are split among its ops once (`index_bundle`, one pass, kept under the
transaction and block hash like the receipt): each of its ops' receipts then takes its own
logs from that split instead of scanning every log of the bundle again, which made the
receipts of an N-op bundle cost N times its logs.

Beside the ERC-4337 fields a receipt says how deep its block is: `confirmations` (its own
block counting as the first, hex) and, where the chain's finality depth is known
(`finality`, set by the service that follows the chain), `final`. On OP-stack chains it
also shows the op's share of its bundle's L1 data fee (`l1Fee`, wei;
`L1FeeQuoter.op_share_wei`).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from eth_abi.abi import decode

from entryway import contracts
from entryway.bundler.gas.l1fee import L1FeeQuoter
from entryway.bundler.op_codec import codec_for
from entryway.chain.finality import Finality
from entryway.chain.limits import is_range_refusal
from entryway.chain.logs import newest_logs
from entryway.chain.rpc import EthClient, RpcError
from entryway.domain.eip7702 import delegate_of
from entryway.domain.evm import hex_to_bytes, to_hex
from entryway.domain.userop import user_op_hash

EP = contracts.load("EntryPoint").abi
USER_OP_EVENT = EP.event_topic("UserOperationEvent")
REVERT_REASON_EVENT = EP.event_topic("UserOperationRevertReason")
BEFORE_EXECUTION_EVENT = EP.event_topic("BeforeExecution")
# The same topics as the node writes them (lower-case hex), compared without decoding.
_USER_OP_TOPIC = to_hex(USER_OP_EVENT)
_REVERT_REASON_TOPIC = to_hex(REVERT_REASON_EVENT)
_BEFORE_EXECUTION_TOPIC = to_hex(BEFORE_EXECUTION_EVENT)
# Bundle receipts kept, by (transaction hash, block hash): enough for the bundles of the
# last few blocks, whose ops are the ones clients ask about.
RECEIPTS_KEPT = 64
# How long a read that found a bundle not mined answers the polls of its ops.
BUNDLE_READ_REUSE_S = 0.025


class _BundleRead:
    """A read of a bundle's receipt and the head: under way, then answered at a time."""

    def __init__(self, read: asyncio.Future[Any]) -> None:
        self.read = read
        self.answer: tuple[str, dict[str, Any] | None] | None = None
        self.answered_at = 0.0
        read.add_done_callback(self._answered)

    def _answered(self, read: asyncio.Future[Any]) -> None:
        if not read.cancelled() and read.exception() is None:
            self.answer = read.result()
            self.answered_at = time.monotonic()

    def reusable(self) -> bool:
        """Under way, or found the bundle not mined less than BUNDLE_READ_REUSE_S ago. A
        read that found it mined is not reused once answered: a poll after a new block
        must see that block's depth, or the reorg that took the bundle's block away."""
        if not self.read.done():
            return True
        return (
            self.answer is not None
            and self.answer[1] is None
            and time.monotonic() - self.answered_at < BUNDLE_READ_REUSE_S
        )


@dataclass(frozen=True, slots=True)
class OpLogs:
    """One op's part of its bundle's logs."""

    event: dict[str, Any]  # its UserOperationEvent
    logs: list[dict[str, Any]]  # what its execution emitted, the EntryPoint's own included
    reason: str  # its revert reason (UserOperationRevertReason), "0x" when none


def index_bundle(logs: list[dict[str, Any]], entry_point: str) -> dict[bytes, OpLogs]:
    """Each op's UserOperationEvent in a bundle's logs (in the order the node gives them),
    by op hash, with the logs its execution emitted: those after the previous op's event (or
    after BeforeExecution) and before its own; in one pass."""
    ep = entry_point.lower()
    ops: dict[bytes, OpLogs] = {}
    reasons: dict[bytes, str] = {}
    since: list[dict[str, Any]] = []  # the logs after the last boundary
    for log in logs:
        topics = log["topics"]
        if topics and log["address"].lower() == ep:
            topic = topics[0].lower()
            if topic == _USER_OP_TOPIC and len(topics) > 1:
                op_hash = hex_to_bytes(topics[1])
                ops.setdefault(op_hash, OpLogs(log, since, reasons.get(op_hash, "0x")))
                since = []
                continue
            if topic == _BEFORE_EXECUTION_TOPIC:
                since = []
                continue
            if topic == _REVERT_REASON_TOPIC and len(topics) > 1:
                (_nonce, revert) = decode(["uint256", "bytes"], hex_to_bytes(log["data"]))
                reasons[hex_to_bytes(topics[1])] = to_hex(revert)
        since.append(log)
    return ops


class ReceiptReader:
    def __init__(
        self, eth: EthClient, entry_point: str, chain_id: int, lookback_blocks: int
    ) -> None:
        self.eth = eth
        self.entry_point = entry_point
        self.chain_id = chain_id
        self.lookback_blocks = lookback_blocks
        # The chain's depths, where the service follows the chain: receipts then say `final`.
        self.finality: Finality | None = None
        # Bundle transaction hash → the last read of its receipt and the head.
        self._bundle_reads: OrderedDict[str, _BundleRead] = OrderedDict()
        self._bundle_receipts: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
        # (transaction hash, block hash) → the bundle's logs split among its ops.
        self._indexes: OrderedDict[tuple[str, str], dict[bytes, OpLogs]] = OrderedDict()
        self._head = -1  # the latest block number last read here

    async def _event_log(self, op_hash: bytes) -> tuple[dict[str, Any] | None, int]:
        """The op's UserOperationEvent log, if any, and the head it was looked for from.

        On a node with no known cap on log queries (`chain.limits`), after the first read
        the head and the logs come in one batch: the lookback window starts from the head
        read last time, which can only make it a few blocks wider. On a capped node, or one
        that refuses that query, the window is read in pages back from the head
        (`chain.logs.newest_logs`): a recent op's log costs one page."""
        topics = {"address": self.entry_point, "topics": [to_hex(USER_OP_EVENT), to_hex(op_hash)]}
        logs: list[dict[str, Any]] | None = None
        if self._head >= 0 and self.eth.rpc.log_range.limit is None:
            start = max(self._head - self.lookback_blocks, 0)
            window = {**topics, "fromBlock": hex(start), "toBlock": "latest"}
            try:
                head, logs = await self.eth.rpc.batch(
                    [("eth_blockNumber", []), ("eth_getLogs", [window])]
                )
                latest = int(head, 16)
            except RpcError as error:
                if not is_range_refusal(error.message):
                    raise
                latest = await self.eth.block_number()
                self.eth.rpc.log_range.refused(latest - start + 1, error.message)
        else:
            latest = await self.eth.block_number()
        if logs is None:
            start = max(latest - self.lookback_blocks, 0)
            logs = await newest_logs(self.eth, topics, start, latest)
        self._head = max(self._head, latest)
        return (logs[-1] if logs else None), latest

    async def _bundle_receipt(self, log: dict[str, Any]) -> dict[str, Any] | None:
        """The receipt of the transaction that emitted `log`, in the block `log` names; None
        if the node has it in no block or another one (reorged away between the reads)."""
        key = (log["transactionHash"], log["blockHash"])
        kept = self._bundle_receipts.get(key)
        if kept is not None:
            return kept
        tx: dict[str, Any] | None = await self.eth.rpc.request(
            "eth_getTransactionReceipt", [log["transactionHash"]]
        )
        if tx is None or tx["blockHash"] != log["blockHash"]:
            return None
        self._bundle_receipts[key] = tx
        while len(self._bundle_receipts) > RECEIPTS_KEPT:
            self._bundle_receipts.popitem(last=False)
        return tx

    async def receipt(
        self, op_hash: bytes, l1_fees: L1FeeQuoter | None = None
    ) -> dict[str, Any] | None:
        """The op's receipt; with `l1_fees` (OP-stack chains), its `l1Fee` too."""
        log, head = await self._event_log(op_hash)
        if log is None:
            return None
        return await self.of_log(log, head, l1_fees)

    async def of_bundle(
        self,
        op_hash: bytes,
        tx_hash: str,
        l1_fees: L1FeeQuoter | None = None,
        *,
        search_logs: bool = True,
    ) -> dict[str, Any] | None:
        """The receipt of an op sent in the bundle `tx_hash`; looked for in the logs as any
        other op's when that bundle does not carry it (the op was included by another bundle)
        or is not on the chain, unless not `search_logs` (the bundle was sent and not seen
        mined yet: while it is not mined, neither is the op, most likely)."""
        head, tx = await self._bundle_read(tx_hash)
        if tx is None and not search_logs:
            return None
        mine = self._ops_of(tx).get(op_hash) if tx is not None else None
        if mine is not None:
            return await self._receipt(mine.event, tx, head, l1_fees)
        return await self.receipt(op_hash, l1_fees)

    def _ops_of(self, tx: dict[str, Any]) -> dict[bytes, OpLogs]:
        """The bundle `tx`'s logs split among its ops (`index_bundle`), made once per
        transaction and block."""
        key = (tx["transactionHash"], tx["blockHash"])
        ops = self._indexes.get(key)
        if ops is None:
            ops = index_bundle(tx["logs"], self.entry_point)
            self._indexes[key] = ops
            while len(self._indexes) > RECEIPTS_KEPT:
                self._indexes.popitem(last=False)
        return ops

    def recently_unmined(self, tx_hash: str) -> bool:
        """Whether a read of the bundle `tx_hash` found it not mined in the last
        BUNDLE_READ_REUSE_S."""
        kept = self._bundle_reads.get(tx_hash)
        return kept is not None and kept.read.done() and kept.reusable()

    async def _bundle_read(self, tx_hash: str) -> tuple[int, dict[str, Any] | None]:
        """(head, the bundle's transaction receipt), in one batch; polls arriving while it
        is read take the same read, and so do those up to BUNDLE_READ_REUSE_S after a read
        that found it not mined."""
        kept = self._bundle_reads.get(tx_hash)
        if kept is None or not kept.reusable():
            kept = _BundleRead(
                asyncio.ensure_future(
                    self.eth.rpc.batch(
                        [("eth_blockNumber", []), ("eth_getTransactionReceipt", [tx_hash])]
                    )
                )
            )
            self._bundle_reads[tx_hash] = kept
            self._bundle_reads.move_to_end(tx_hash)
            while len(self._bundle_reads) > RECEIPTS_KEPT:
                self._bundle_reads.popitem(last=False)
        head, tx = await asyncio.shield(kept.read)
        return int(head, 16), tx

    async def of_log(
        self, log: dict[str, Any], head: int, l1_fees: L1FeeQuoter | None = None
    ) -> dict[str, Any] | None:
        """The receipt of the op whose UserOperationEvent `log` is (as `eth_getLogs` gives
        it), read when the chain's head was `head`; None if its block was reorged away."""
        tx = await self._bundle_receipt(log)
        return await self._receipt(log, tx, head, l1_fees)

    async def _receipt(
        self,
        log: dict[str, Any],
        tx: dict[str, Any] | None,
        head: int,
        l1_fees: L1FeeQuoter | None,
    ) -> dict[str, Any] | None:
        op_hash = hex_to_bytes(log["topics"][1])
        if tx is None or tx["blockHash"] != log["blockHash"]:
            return None  # reorged away between the two reads
        mine = self._ops_of(tx).get(op_hash)
        if mine is None:
            return None  # the log is not the bundle's: the two reads disagree
        event = EP.decode_event(
            "UserOperationEvent",
            [hex_to_bytes(t) for t in log["topics"]],
            hex_to_bytes(log["data"]),
        )
        op_logs, reason = mine.logs, mine.reason
        doc: dict[str, Any] = {
            "userOpHash": to_hex(op_hash),
            "entryPoint": self.entry_point,
            "sender": event["sender"],
            "nonce": hex(event["nonce"]),
            "paymaster": event["paymaster"],
            "actualGasCost": hex(event["actualGasCost"]),
            "actualGasUsed": hex(event["actualGasUsed"]),
            "success": event["success"],
            "reason": reason,
            "logs": op_logs,
            "receipt": tx,
            **self._depth(head, int(tx["blockNumber"], 16)),
        }
        if l1_fees is not None:
            bundle = await self.eth.rpc.request(
                "eth_getTransactionByHash", [log["transactionHash"]]
            )
            if bundle is None or bundle.get("blockHash") != log["blockHash"]:
                return None
            share = await l1_fees.op_share_wei(bundle, tx, event["sender"], event["nonce"])
            if share is not None:
                doc["l1Fee"] = hex(share)
        return doc

    def _depth(self, head: int, block: int) -> dict[str, Any]:
        """`confirmations` of a block mined by `head` (a later head may have found the
        log: never fewer than one), and `final` where the chain's depth is known."""
        head = max(head, block)
        depth: dict[str, Any] = {"confirmations": hex(head - block + 1)}
        if self.finality is not None:
            depth["final"] = self.finality.is_final(head, block)
        return depth

    async def user_operation_in(self, op_hash: bytes, bundle: str) -> dict[str, Any] | None:
        """The op as eth_getUserOperationByHash gives it once mined, if the transaction
        `bundle` (one a bundler of ours sent it in) is mined and executed it: its receipt,
        the read the receipt polls share, holds the op's event."""
        _, receipt = await self._bundle_read(bundle)
        if receipt is None or op_hash not in self._ops_of(receipt):
            return None
        return await self._op_in(op_hash, bundle, receipt["blockHash"])

    async def user_operation(self, op_hash: bytes) -> dict[str, Any] | None:
        """The mined op as eth_getUserOperationByHash gives it, found by its event in the
        logs, whoever bundled it."""
        log, _head = await self._event_log(op_hash)
        if log is None:
            return None
        return await self._op_in(op_hash, log["transactionHash"], log["blockHash"])

    async def _op_in(self, op_hash: bytes, tx_hash: str, block_hash: str) -> dict[str, Any] | None:
        """The op, read off the calldata of the bundle `tx_hash` mined in `block_hash`."""
        tx = await self.eth.rpc.request("eth_getTransactionByHash", [tx_hash])
        if tx is None or tx.get("blockHash") != block_hash:
            return None
        codec = codec_for(self.entry_point)
        ops = codec.ops_of_bundle(hex_to_bytes(tx["input"]))
        for op in ops or ():
            delegate = None
            if op.is_eip7702:  # hashed with its delegate: read it off the sender's code
                delegate = delegate_of(await self.eth.get_code(op.sender, tx["blockNumber"]))
                if delegate is None:
                    continue
            if user_op_hash(op, self.entry_point, self.chain_id, delegate=delegate) == op_hash:
                return {
                    "userOperation": codec.to_json(op),
                    "entryPoint": self.entry_point,
                    "transactionHash": tx["hash"],
                    "blockHash": tx["blockHash"],
                    "blockNumber": tx["blockNumber"],
                }
        return None
