"""A chain's follower: polls the node's head, and tells what a reorg removed.

Each poll reads the latest block, then blocks back from it until the new chain joins the
blocks last seen (`chain.follower.CanonicalWindow` decides how far). The blocks a reorg
removed go to `on_removed`, oldest first; until it has handled them (a database down, say)
they are offered again on every poll, with any removed since. Each new head then goes to
`on_head` (finality: blocks deep enough count as final).

A node that stops answering is logged once, and once again when it answers (its endpoints'
outages are the node client's to log); the follower carries on from the blocks it held.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from entryway.chain.finality import Finality, finality_of, is_dev_node
from entryway.chain.follower import BlockRef, CanonicalWindow
from entryway.chain.rpc import EthClient

log = logging.getLogger("entryway.chain")
Removed = Callable[[int, list[BlockRef]], Awaitable[None]]  # chain id, blocks removed
NewHead = Callable[[int, BlockRef, Finality], Awaitable[None]]  # chain id, head, depths
READ_BACK_ATTEMPTS = 3  # a chain that reorgs again while read back is read afresh


class ChainFollower:
    def __init__(
        self,
        eth: EthClient,
        chain_id: int,
        finality: Finality,
        *,
        on_removed: Removed,
        on_head: NewHead | None = None,
        poll_s: float = 1.0,
    ) -> None:
        self.eth = eth
        self.chain_id = chain_id
        self.finality = finality
        self.window = CanonicalWindow(finality.reorg_depth)
        self.on_removed = on_removed
        self.on_head = on_head
        self.poll_s = poll_s
        self._unhandled: dict[tuple[int, str], BlockRef] = {}
        self._failing = False

    @classmethod
    async def for_node(
        cls,
        eth: EthClient,
        chain_id: int,
        *,
        finality_depth: int | None,
        reorg_depth: int | None,
        on_removed: Removed,
        on_head: NewHead | None = None,
        poll_s: float = 1.0,
    ) -> ChainFollower:
        """A follower with the chain's depths: those configured, else its defaults, which
        depend on whether the node is a development node (`chain.finality`)."""
        dev_node = False
        if finality_depth is None:
            try:
                dev_node = is_dev_node(str(await eth.rpc.request("web3_clientVersion")))
            except Exception:
                log.info("chain %d: the node does not name itself; a real chain's depths", chain_id)
        finality = finality_of(
            chain_id, finality_depth=finality_depth, reorg_depth=reorg_depth, dev_node=dev_node
        )
        return cls(eth, chain_id, finality, on_removed=on_removed, on_head=on_head, poll_s=poll_s)

    async def read(self) -> tuple[BlockRef, list[BlockRef]]:
        """The node's head, and the blocks last seen that it no longer has."""
        for _ in range(READ_BACK_ATTEMPTS):
            head = BlockRef.of(await self.eth.get_block("latest"))
            if self.window.head == head:
                return head, []
            segment = [head]
            while (number := self.window.next_needed(segment)) is not None:
                block = BlockRef.of(await self.eth.get_block(hex(number)))
                if block.hash != segment[0].parent_hash:
                    break  # the chain moved while read back
                segment.insert(0, block)
            else:
                return head, self.window.advance(segment)
        raise RuntimeError(f"chain {self.chain_id} kept reorganising while read back")

    async def step(self) -> list[BlockRef]:
        """One poll: the blocks removed since the last (handled by `on_removed`)."""
        head, removed = await self.read()
        if removed:
            log.warning(
                "chain %d: a reorg removed %d block(s), %d to %d; now at block %d",
                self.chain_id,
                len(removed),
                removed[0].number,
                removed[-1].number,
                head.number,
            )
        for block in removed:
            self._unhandled[(block.number, block.hash)] = block
        if self._unhandled:
            pending = sorted(self._unhandled.values(), key=lambda b: b.number)
            await self.on_removed(self.chain_id, pending)
            self._unhandled.clear()
        if self.on_head is not None:
            await self.on_head(self.chain_id, head, self.finality)
        return removed

    async def follow(self) -> None:
        """Poll forever; a failing poll is logged once, and its recovery once."""
        while True:
            try:
                await self.step()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not self._failing:
                    log.warning(
                        "chain %d: following the chain failed (%s); retrying, logged again "
                        "when it works",
                        self.chain_id,
                        type(exc).__name__,
                    )
                self._failing = True
            else:
                if self._failing:
                    log.info("chain %d: following the chain again", self.chain_id)
                self._failing = False
            await asyncio.sleep(self.poll_s)
