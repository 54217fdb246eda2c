"""Ops this bundler bundled whose block a reorg removed: back to the mempool, or dropped.

The bundler keeps the body and block of each op it saw mined (`bundler.tracking`). When that
block leaves the chain (the chain's follower names the removed blocks, or a status read finds
the op's event gone) the op is validated again and, if it still passes, re-enters the mempool
through the ordinary send path with nothing charged again (no `before_mempool`); it is then
bundled like any op. One that no longer validates (its nonce used by another op on the new
chain, its account or paymaster short of funds, its validity window passed) is dropped, and
its status says why.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import TYPE_CHECKING

from entryway.bundler.errors import BundlerError
from entryway.bundler.states import MINED, OpStatus, Tracked

if TYPE_CHECKING:
    from entryway.bundler.service import Bundler

log = logging.getLogger("entryway.bundler")
REORGED = "its block left the chain"


class ReorgedOps:
    def __init__(self, bundler: Bundler) -> None:
        self.bundler = bundler
        self._handling: set[bytes] = set()  # ops whose removed block is being handled

    async def blocks_removed(self, block_numbers: Collection[int]) -> None:
        """Every op this bundler had mined in these removed blocks, re-included or dropped.
        An op whose turn fails (the node down) is left to its next status read."""
        failed = 0
        for op_hash in self.bundler.tracked.mined_in(block_numbers):
            try:
                await self.reinclude(op_hash)
            except Exception:
                failed += 1
        if failed:
            log.warning(
                "%d op(s) whose block a reorg removed could not be sent again now; "
                "their next status read retries",
                failed,
            )

    async def reinclude(self, op_hash: bytes) -> Tracked | None:
        """An op seen mined whose event is gone: back in the mempool if it still validates,
        else dropped. What it now is; None when its bundle is on the chain after all (mined
        again, or a log lookup that missed it)."""
        bundler = self.bundler
        tracked = bundler.tracked.get(op_hash)
        if tracked is None or tracked.status not in MINED:
            return tracked
        if op_hash in self._handling or bundler.mempool.get(op_hash) is not None:
            return Tracked(OpStatus.PENDING)
        self._handling.add(op_hash)
        try:
            if tracked.tx_hash and await bundler.eth.get_receipt(tracked.tx_hash) is not None:
                return None
            if tracked.op is None:
                return self._drop(op_hash, REORGED)
            try:
                await bundler.send(tracked.op)
            except BundlerError as exc:
                return self._drop(op_hash, f"{REORGED} and it no longer validates: {exc.message}")
            log.info("op 0x%s, whose block a reorg removed, is back in the mempool", op_hash.hex())
            return bundler.tracked.get(op_hash)
        finally:
            self._handling.discard(op_hash)

    def _drop(self, op_hash: bytes, reason: str) -> Tracked:
        log.info("dropped op 0x%s: %s", op_hash.hex(), reason)
        tracked = self.bundler.tracked[op_hash] = Tracked(OpStatus.DROPPED, reason=reason)
        self.bundler.counts.ops_dropped += 1
        return tracked
