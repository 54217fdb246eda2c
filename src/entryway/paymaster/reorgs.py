"""What a reorg does to the sponsorships mined in the blocks it removed.

Each settlement standing on an op mined in a removed block is reversed by an explicit
ledger entry (`storage.ledger_reorgs`), and, in the same transaction, the op's settlement
task is queued again (marked `reorged`). That task (`paymaster.settlement`) then settles
the op anew if a block has it again; sends it back to the mempool if no block has it and it
is still valid; and otherwise reports it dropped (`userop.dropped`), its sponsorship then
costing nothing. Each reversal is announced as `userop.reorged`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from entryway.domain.tasks import Task
from entryway.paymaster.inclusions import Reversal
from entryway.paymaster.settlement import SETTLE_MAX_ATTEMPTS, SETTLE_TASK

log = logging.getLogger(__name__)
Reorged = Callable[[Reversal], Awaitable[None]]  # told each reversal, once committed
FollowUp = Callable[[AsyncConnection, Reversal], Awaitable[None]]


class ReversingLedger(Protocol):
    async def reverse_in_blocks(
        self,
        chain_id: int,
        block_numbers: Sequence[int],
        at: datetime,
        follow_up: FollowUp | None = None,
    ) -> list[Reversal]: ...


class TaskQueuePort(Protocol):
    """The durable task queue, inside the caller's transaction (`storage.tasks.TaskQueue`)."""

    async def keyed_in(
        self, db: AsyncConnection, kind: str, idempotency_key: str
    ) -> Task | None: ...

    async def enqueue_in(
        self,
        db: AsyncConnection,
        kind: str,
        payload: Mapping[str, Any],
        *,
        project_id: str | None,
        run_at: datetime | None = None,
        idempotency_key: str | None = None,
        max_attempts: int = ...,
    ) -> str: ...


def settle_task_key(chain_id: int, user_op_hash: str) -> str:
    """The idempotency key of an op's settlement task (`paymaster.relay_accounting`)."""
    return f"{chain_id}:{user_op_hash}"


class SponsorshipReorgs:
    def __init__(
        self, ledger: ReversingLedger, queue: TaskQueuePort, on_reorged: Reorged | None = None
    ) -> None:
        self.ledger = ledger
        self.queue = queue
        self.on_reorged = on_reorged

    async def removed(self, chain_id: int, block_numbers: Sequence[int]) -> list[Reversal]:
        """Reverse the settlements of ops mined in these removed blocks; the reversals."""
        reversals = await self.ledger.reverse_in_blocks(
            chain_id, block_numbers, datetime.now(UTC), self._settle_again
        )
        for reversal in reversals:
            log.warning(
                "op %s left chain %d with block %d: its settlement of %d credits is reversed",
                reversal.user_op_hash,
                chain_id,
                reversal.block_number,
                reversal.credits,
            )
            if self.on_reorged is not None:
                try:
                    await self.on_reorged(reversal)
                except Exception:
                    log.exception("announcing the reorg of op %s failed", reversal.user_op_hash)
        return reversals

    async def _settle_again(self, db: AsyncConnection, reversal: Reversal) -> None:
        """Queue the op's settlement again, in the reversal's transaction."""
        first_key = settle_task_key(reversal.chain_id, reversal.user_op_hash)
        first = await self.queue.keyed_in(db, SETTLE_TASK, first_key)
        if first is None:
            log.warning("op %s has no settlement task to queue again", reversal.user_op_hash)
            return
        await self.queue.enqueue_in(
            db,
            SETTLE_TASK,
            {**first.payload, "reorged": reversal.reversals},
            project_id=reversal.project_id,
            idempotency_key=f"{first_key}#reorg{reversal.reversals}",
            max_attempts=SETTLE_MAX_ATTEMPTS,
        )
