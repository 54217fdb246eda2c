"""Notary batches whose anchor a reorg removed: back to sealed, and anchored again.

A batch anchored in a block the chain no longer has loses its anchor (the transaction, the
block, the time: its proofs are no longer valid, so none are handed out) and is sealed
again, with a fresh anchoring task, in one transaction. The task anchors the same root
(the leaves and their order are unchanged) and records the new anchor: the proofs of its
notarizations are those of the new anchor from then on. `reanchors` counts how often this
happened to a batch, so each re-anchoring is announced once (`notarization.reanchored`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select, update

from entryway.domain.notarization import ANCHOR_TASK, BatchState
from entryway.storage.notary import ANCHOR_MAX_ATTEMPTS, NotaryStore
from entryway.storage.schema import notary_batches as _b


@dataclass(frozen=True, slots=True)
class Unanchored:
    """A batch whose anchor a reorg removed, sealed again for anchoring."""

    batch_id: str
    chain_id: int
    transaction_hash: str  # of the anchor removed
    block_number: int
    reanchors: int  # this one included


async def unanchor_in_blocks(
    store: NotaryStore, chain_id: int, block_numbers: Sequence[int]
) -> list[Unanchored]:
    """Seal again every batch of the chain anchored in one of these blocks, and queue its
    anchoring; the batches so treated (none twice for one removal: only anchored batches
    are taken, and each is sealed in the same statement that checks it)."""
    done = []
    async with store.engine.begin() as db:
        rows = (
            await db.execute(
                select(_b.c.batch_id, _b.c.transaction_hash, _b.c.block_number, _b.c.reanchors)
                .where(
                    _b.c.chain_id == chain_id,
                    _b.c.state == BatchState.ANCHORED.value,
                    _b.c.block_number.in_(list(block_numbers)),
                )
                .order_by(_b.c.batch_id)
            )
        ).all()
        for row in rows:
            count = int(row.reanchors) + 1
            sealed = await db.execute(
                update(_b)
                .where(_b.c.batch_id == row.batch_id, _b.c.state == BatchState.ANCHORED.value)
                .values(
                    state=BatchState.SEALED.value,
                    contract=None,
                    transaction_hash=None,
                    block_number=None,
                    block_time=None,
                    anchored_at=None,
                    reanchors=count,
                )
            )
            if sealed.rowcount != 1:
                continue
            task_id = await store.queue.enqueue_in(
                db,
                ANCHOR_TASK,
                {"batchId": row.batch_id, "chainId": chain_id},
                project_id=None,
                idempotency_key=f"{row.batch_id}#reanchor{count}",
                max_attempts=ANCHOR_MAX_ATTEMPTS,
            )
            await db.execute(
                update(_b).where(_b.c.batch_id == row.batch_id).values(task_id=task_id)
            )
            done.append(
                Unanchored(
                    row.batch_id, chain_id, row.transaction_hash, int(row.block_number), count
                )
            )
    return done


async def reanchors(store: NotaryStore, batch_id: str) -> int:
    """How often a reorg removed the batch's anchor."""
    async with store.engine.connect() as db:
        found = await db.scalar(select(_b.c.reanchors).where(_b.c.batch_id == batch_id))
    return int(found or 0)
