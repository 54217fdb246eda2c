"""Which blocks a reorg removed, judged from block and parent hashes. Pure.

A chain's follower keeps the last `depth` blocks it has seen (number, hash, parent hash).
On each new head it reads blocks back from the head, newest first, until one's parent is a
block it holds with that very hash: there the new chain joins the old one. Every block it
held above that point and that the new chain does not have (another hash at its number, or
no block at its number at all: a chain cut short, as a node restarted from older state) was
removed. A reorg deeper than `depth` is not seen: past it, blocks count as final.

`CanonicalWindow` decides; reading blocks is the caller's part (`chain.following`), so the
rules are tested without a node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

READ_BACK_WINDOWS = 4


@dataclass(frozen=True, slots=True)
class BlockRef:
    number: int
    hash: str
    parent_hash: str

    @classmethod
    def of(cls, block: dict[str, object]) -> BlockRef:
        """From an `eth_getBlockByNumber` answer."""
        number = int(str(block["number"]), 16)
        return cls(number, str(block["hash"]).lower(), str(block["parentHash"]).lower())


class CanonicalWindow:
    """The last `depth` blocks of the chain as last seen, by number."""

    def __init__(self, depth: int) -> None:
        if depth < 1:
            raise ValueError("a reorg window holds at least one block")
        self.depth = depth
        self._blocks: dict[int, BlockRef] = {}

    @property
    def head(self) -> BlockRef | None:
        return self._blocks[max(self._blocks)] if self._blocks else None

    def blocks(self) -> list[BlockRef]:
        return [self._blocks[n] for n in sorted(self._blocks)]

    def next_needed(self, segment: Sequence[BlockRef]) -> int | None:
        """With `segment` read back from the node's head (oldest first, contiguous), the
        number of the block to read next, or None once the segment joins the blocks held
        (its oldest block's parent is held with that hash) or reaches below them. A window
        still empty (the first poll) is filled `depth` blocks deep. Reading back stops at
        `READ_BACK_WINDOWS` windows (a node far ahead after an outage): the blocks held are
        then all that far below its head, final, and forgotten."""
        oldest = segment[0]
        below = oldest.number - 1
        if below < 0:
            return None
        if not self._blocks:
            return below if len(segment) < self.depth else None
        if below < min(self._blocks) or len(segment) >= READ_BACK_WINDOWS * self.depth:
            return None
        held = self._blocks.get(below)
        if held is not None and held.hash == oldest.parent_hash:
            return None
        return below

    def advance(self, segment: Sequence[BlockRef]) -> list[BlockRef]:
        """Take `segment` (oldest first, contiguous, ending at the node's head) as the
        canonical chain from its first block on; returns the blocks held that it removed,
        oldest first. Blocks older than `depth` below the head are then forgotten."""
        if not segment:
            return []
        start = segment[0].number
        current = {b.number: b for b in segment}
        removed = [
            b
            for n, b in sorted(self._blocks.items())
            if n >= start and (n not in current or current[n].hash != b.hash)
        ]
        for b in removed:
            del self._blocks[b.number]
        self._blocks.update(current)
        floor = segment[-1].number - self.depth
        for n in [n for n in self._blocks if n <= floor]:
            del self._blocks[n]
        return removed
