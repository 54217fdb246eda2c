"""Billing follows the chain: every UserOperationEvent that names one of our paymasters is
charged to the project that was given the paymaster's signature, whoever submitted the op
(our bundler, another bundler, a `handleOps` sent straight to the EntryPoint), and whether
the op's execution succeeded or reverted (its gas was paid either way).

One `PaymasterEventFollower` per chain reads the EntryPoints' logs in block ranges from a
durable cursor, for every EntryPoint release the chain serves and its paymaster, and for
each event finds the signature's record (`SignatureBook.for_event`, written before the
signature was returned), settles the hold it drew on from the event's `actualGasCost`, and
writes where the op was mined. Settling is idempotent per hold, so an op that the settler
also saw through our bundler, or that several processes follow, is charged once.

The cursor also keeps the newest block read that is final (`finality_depth` below the head)
and its timestamp: a signature whose `validUntil` lies before that time and that has no
event can never be mined any more, so its hold may be released
(`settlement.signatures_dead`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from entryway import contracts
from entryway.bundler.port import Receipt
from entryway.chain.logs import logs_between
from entryway.chain.rpc import EthClient, RpcError, RpcTransportError
from entryway.domain.evm import hex_to_bytes, to_hex
from entryway.paymaster.ports import ENTRYWAY, EXTERNAL, EventCursor, SignatureBook
from entryway.paymaster.settlement import SponsoredOp

log = logging.getLogger(__name__)
EP = contracts.load("EntryPoint").abi
USER_OP_EVENT = to_hex(EP.event_topic("UserOperationEvent"))
MAX_RANGE = 2_000  # blocks per eth_getLogs: within what common providers allow
START_LOOKBACK = 10_000  # blocks read back on a chain's first start


# The receipt of the op whose event log this is, read at this head (None: reorged away).
ReceiptOfLog = Callable[[dict[str, Any], int], Awaitable[Receipt | None]]
# Settle the op's hold from its receipt and announce it (`SponsorshipSettler.charge`).
Charge = Callable[[SponsoredOp, Receipt], Awaitable[None]]
# Whether the project sent this op through the service (chain id, project, userOpHash).
SentHere = Callable[[int, str, str], Awaitable[bool]]


def paymaster_topic(paymaster: str) -> str:
    return "0x" + bytes(12).hex() + paymaster.lower().removeprefix("0x")


class PaymasterEventFollower:
    def __init__(
        self,
        eth: EthClient,
        chain_id: int,
        paymasters: Mapping[str, str],
        book: SignatureBook,
        *,
        receipt_of_log: ReceiptOfLog,
        charge: Charge,
        sent_here: SentHere,
        finality_depth: int,
        poll_s: float = 1.0,
        max_range: int = MAX_RANGE,
        start_lookback: int = START_LOOKBACK,
    ) -> None:
        """`paymasters`: EntryPoint -> our paymaster at it, for every release served."""
        self.eth = eth
        self.chain_id = chain_id
        self.paymasters = {ep.lower(): pm.lower() for ep, pm in paymasters.items()}
        self.book = book
        self.receipt_of_log = receipt_of_log
        self.charge = charge
        self.sent_here = sent_here
        self.finality_depth = finality_depth
        self.poll_s = poll_s
        self.max_range = max_range
        self.start_lookback = start_lookback
        self._rewind_to: int | None = None
        self._unattributed: set[str] = set()  # logged once each
        self._failing = False

    def rewind(self, block: int) -> None:
        """A reorg removed blocks from `block` on: read them again (their settlements were
        reversed; the ops they held may be mined again elsewhere)."""
        self._rewind_to = block if self._rewind_to is None else min(self._rewind_to, block)

    async def step(self) -> int:
        """Read the next range of blocks; the number of our paymasters' events charged."""
        head = await self.eth.block_number()
        cursor = await self.book.cursor(self.chain_id)
        if cursor is None:
            cursor = EventCursor(max(head - self.start_lookback, 0), -1, 0)
        elif cursor.next_block > head + 1:
            # The chain is shorter than what was read (a node restarted from older state):
            # its blocks from there on may differ; read them, and the lookback, again.
            log.warning(
                "chain %d: the node's head %d is below the paymaster events read (to %d); "
                "reading again from block %d",
                self.chain_id,
                head,
                cursor.next_block - 1,
                max(head - self.start_lookback, 0),
            )
            cursor = EventCursor(max(head - self.start_lookback, 0), -1, 0)
        if self._rewind_to is not None:
            cursor = EventCursor(
                min(cursor.next_block, self._rewind_to), cursor.final_block, cursor.final_time
            )
            self._rewind_to = None
        start = cursor.next_block
        if start > head:
            return 0
        end = min(head, start + self.max_range - 1)
        charged = 0
        for event in await self._events(start, end):
            if not await self._charge(event, head):
                end = int(event["blockNumber"], 16) - 1  # its receipt next time, from there
                break
            charged += 1
        await self.book.save_cursor(self.chain_id, await self._advanced(cursor, end, head))
        return charged

    async def _events(self, start: int, end: int) -> list[dict[str, Any]]:
        query = {
            "address": sorted(self.paymasters),
            "topics": [
                USER_OP_EVENT,
                None,
                None,
                sorted({paymaster_topic(pm) for pm in self.paymasters.values()}),
            ],
        }
        logs = await logs_between(self.eth, query, start, end)
        ours = [
            e
            for e in logs or ()
            if not e.get("removed")
            and self.paymasters.get(str(e["address"]).lower()) == _topic_address(e["topics"][3])
        ]
        return sorted(ours, key=lambda e: (int(e["blockNumber"], 16), int(e["logIndex"], 16)))

    async def _charge(self, event: dict[str, Any], head: int) -> bool:
        """Charge one event's op to its signature's project; False when its receipt cannot
        be read now (to be read again)."""
        user_op_hash = str(event["topics"][1]).lower()
        decoded = EP.decode_event(
            "UserOperationEvent",
            [hex_to_bytes(t) for t in event["topics"]],
            hex_to_bytes(event["data"]),
        )
        found = await self.book.for_event(
            self.chain_id, user_op_hash, str(decoded["sender"]), int(decoded["nonce"])
        )
        if found is None:
            if user_op_hash not in self._unattributed:
                self._unattributed.add(user_op_hash)
                log.error(
                    "chain %d: op %s used our paymaster at %s but no signature of ours was "
                    "recorded for it; it is charged to nobody",
                    self.chain_id,
                    user_op_hash,
                    event["address"],
                )
            return True
        receipt = await self.receipt_of_log(event, head)
        if receipt is None:
            return False
        here = await self.sent_here(self.chain_id, found.project_id, user_op_hash)
        submitted_by = ENTRYWAY if here else EXTERNAL
        sponsored = SponsoredOp(
            found.project_id,
            self.chain_id,
            user_op_hash,
            found.op,
            found.valid_until,
            submitted_by=submitted_by,
        )
        await self.charge(sponsored, receipt)
        await self.book.mark_mined(
            found.signature_id,
            user_op_hash,
            receipt.block_number,
            receipt.transaction_hash,
            submitted_by,
        )
        return True

    async def _advanced(self, cursor: EventCursor, end: int, head: int) -> EventCursor:
        """The cursor past `end`, its final block moved up to what is read and final."""
        final = min(end, head - self.finality_depth)
        if final <= cursor.final_block:
            return EventCursor(end + 1, cursor.final_block, cursor.final_time)
        block = await self.eth.get_block(hex(final))
        return EventCursor(end + 1, final, int(block["timestamp"], 16))

    async def follow(self) -> None:
        """Step forever: at once while behind, else once per poll. A node or database that
        fails is logged once, and once again when it is back."""
        while True:
            try:
                charged = await self.step()
            except (RpcError, RpcTransportError) as exc:
                # The node's outage is the node client's to log; this says what waits on it.
                if not self._failing:
                    log.warning(
                        "chain %d: our paymaster's events wait for the node (%s); retrying",
                        self.chain_id,
                        exc,
                    )
                self._failing = True
                await asyncio.sleep(self.poll_s)
                continue
            except Exception:
                if not self._failing:
                    log.exception(
                        "chain %d: reading our paymaster's events failed; retrying", self.chain_id
                    )
                self._failing = True
                await asyncio.sleep(self.poll_s)
                continue
            if self._failing:
                log.info("chain %d: reading our paymaster's events again", self.chain_id)
                self._failing = False
            if not charged:
                await asyncio.sleep(self.poll_s)


def _topic_address(topic: str) -> str:
    return "0x" + str(topic)[-40:].lower()
