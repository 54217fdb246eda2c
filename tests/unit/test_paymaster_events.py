"""The paymaster event follower's reading of the chain, over a node and a book in memory:
which block ranges it asks for, where its cursor stands after each step, and the final block
it reports (the one the release of dead signatures waits for)."""

from __future__ import annotations

from typing import Any

from entryway.bundler.port import Receipt
from entryway.chain.limits import LogRange
from entryway.paymaster.chain_charges import USER_OP_EVENT, PaymasterEventFollower
from entryway.paymaster.ports import EventCursor, StoredSignature
from entryway.paymaster.settlement import SponsoredOp

CHAIN = 80002
EP = "0x4337084d9e255ff0702461cf8895ce9e3b5ff108"
PM = "0x" + "ab" * 20


class Node:
    def __init__(self, head: int) -> None:
        self.head = head
        self.ranges: list[tuple[int, int]] = []
        self.logs: list[dict[str, Any]] = []
        self.rpc = self
        self.log_range = LogRange()  # no cap: one query a step, as the follower asks

    async def block_number(self) -> int:
        return self.head

    async def get_block(self, number: str) -> dict[str, str]:
        return {"timestamp": hex(1_000 + int(number, 16))}

    async def request(self, method: str, params: list[Any]) -> Any:
        assert method == "eth_getLogs"
        start, end = int(params[0]["fromBlock"], 16), int(params[0]["toBlock"], 16)
        self.ranges.append((start, end))
        return [e for e in self.logs if start <= int(e["blockNumber"], 16) <= end]


class Book:
    def __init__(self) -> None:
        self.saved: EventCursor | None = None

    async def for_event(
        self, chain_id: int, user_op_hash: str, sender: str, nonce: int
    ) -> StoredSignature | None:
        return None

    async def mark_mined(self, *args: Any) -> None:
        raise AssertionError("nothing is ours here")

    async def for_hold(self, project_id: str, hold_key: str) -> list[StoredSignature]:
        return []

    async def cursor(self, chain_id: int) -> EventCursor | None:
        return self.saved

    async def save_cursor(self, chain_id: int, cursor: EventCursor) -> None:
        self.saved = cursor


async def _no_receipt(log: dict[str, Any], head: int) -> Receipt | None:
    return None


async def _charge(op: SponsoredOp, receipt: Receipt) -> None:
    raise AssertionError("nothing to charge")


async def _not_here(chain_id: int, project_id: str, user_op_hash: str) -> bool:
    return False


def follower(node: Node, book: Book, **options: Any) -> PaymasterEventFollower:
    return PaymasterEventFollower(
        node,  # type: ignore[arg-type]
        CHAIN,
        {EP: PM},
        book,
        receipt_of_log=_no_receipt,
        charge=_charge,
        sent_here=_not_here,
        finality_depth=5,
        max_range=100,
        start_lookback=250,
        **options,
    )


async def test_a_first_start_reads_back_the_lookback_in_ranges_and_reports_the_final_block() -> (
    None
):
    node, book = Node(head=1_000), Book()
    f = follower(node, book)
    while book.saved is None or book.saved.next_block <= node.head:
        await f.step()
    assert node.ranges == [(750, 849), (850, 949), (950, 1_000)]
    assert book.saved == EventCursor(1_001, 995, 1_995)  # head - depth, and its timestamp
    node.head = 1_003
    await f.step()
    assert node.ranges[-1] == (1_001, 1_003)
    assert book.saved == EventCursor(1_004, 998, 1_998)


async def test_a_rewind_reads_the_removed_blocks_again() -> None:
    node, book = Node(head=500), Book()
    book.saved = EventCursor(501, 495, 1_495)
    f = follower(node, book)
    f.rewind(497)
    f.rewind(499)  # the lowest removed block wins
    await f.step()
    assert node.ranges == [(497, 500)]
    assert book.saved == EventCursor(501, 495, 1_495)  # the final block stands


async def test_a_chain_shorter_than_what_was_read_is_read_again_from_its_lookback() -> None:
    node, book = Node(head=300), Book()
    book.saved = EventCursor(900, 890, 1_890)  # a node restarted from older state
    await follower(node, book).step()
    assert node.ranges == [(50, 149)]
    assert book.saved is not None and book.saved.final_block == 149  # waits for the re-read


async def test_an_event_whose_receipt_cannot_be_read_yet_holds_the_cursor_before_its_block() -> (
    None
):
    node, book = Node(head=200), Book()
    book.saved = EventCursor(150, 140, 1_140)
    node.logs = [
        {
            "address": EP,
            "blockNumber": hex(170),
            "logIndex": "0x0",
            "topics": [
                USER_OP_EVENT,
                "0x" + "11" * 32,
                "0x" + "00" * 32,
                "0x" + "00" * 12 + PM[2:],
            ],
            "data": "0x" + "00" * 128,
        }
    ]

    class Ours(Book):
        async def for_event(
            self, chain_id: int, user_op_hash: str, sender: str, nonce: int
        ) -> StoredSignature | None:
            return StoredSignature(
                "s1",
                "p1",
                CHAIN,
                EP,
                user_op_hash,
                None,
                "k",
                0,
                None,  # type: ignore[arg-type]
            )

    ours = Ours()
    ours.saved = book.saved
    await follower(node, ours).step()
    assert node.ranges == [(150, 200)]
    assert ours.saved is not None and ours.saved.next_block == 170  # read again from there
