"""The durable task that anchors one sealed batch (kind `notary.anchor`), and announces it.

The handler may run more than once for a batch (a retry, a worker that died), so each step
is idempotent:

1. the tree is rebuilt from the batch's leaves, in their stored order: the same root;
2. `Anchorer.anchor` finds a root already on chain instead of sending it again, so a worker
   that died between the transaction and step 3 heals on the next attempt;
3. recording the anchor only moves a sealed batch to anchored;
4. the `notarization.anchored` events carry idempotency keys: emitted once each.

Events go per project and batch, at most `event_chunk` notarizations per event (ids and
document hashes; the proofs are read through the API), so a 100,000-leaf batch of one
project is 100 events, not 100,000.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from entryway.domain.merkle import MerkleTree
from entryway.domain.notarization import ANCHOR_TASK, Batch, BatchMember, BatchState
from entryway.domain.tasks import PermanentTaskError, RetryTaskError, Task
from entryway.domain.webhooks import EventPublisher, EventType
from entryway.notary.anchor import Anchorer
from entryway.notary.verify import block_time_text
from entryway.storage.notary import NotaryStore
from entryway.storage.notary_reanchor import reanchors

EVENT_CHUNK = 1_000
NO_ANCHORER_RETRY_SECONDS = 60.0


class AnchorBatchHandler:
    def __init__(
        self,
        store: NotaryStore,
        anchorers: Mapping[int, Anchorer],
        events: EventPublisher,
        *,
        event_chunk: int = EVENT_CHUNK,
    ) -> None:
        self.store = store
        self.anchorers = dict(anchorers)
        self.events = events
        self.event_chunk = event_chunk

    async def __call__(self, task: Task) -> dict[str, Any]:
        batch_id = str(task.payload["batchId"])
        batch = await self.store.batch(batch_id)
        if batch is None:
            raise PermanentTaskError(f"no notary batch {batch_id}")
        if batch.state is BatchState.SEALED:
            batch = await self._anchor(batch, final_attempt=task.final_attempt)
        if batch.state is BatchState.FAILED:
            return {"batchId": batch_id, "state": batch.state.value, "error": batch.error}
        await self.announce(batch)
        assert batch.anchor is not None and batch.root is not None
        return {
            "batchId": batch_id,
            "state": batch.state.value,
            "root": "0x" + batch.root.hex(),
            "leafCount": batch.leaf_count,
            "transactionHash": "0x" + batch.anchor.transaction_hash.hex(),
        }

    async def _anchor(self, batch: Batch, *, final_attempt: bool) -> Batch:
        anchorer = self.anchorers.get(batch.chain_id)
        if anchorer is None:
            # Another worker (with the notary key for this chain) may take it.
            raise RetryTaskError(
                f"this worker anchors nothing on chain {batch.chain_id}",
                delay=NO_ANCHORER_RETRY_SECONDS,
            )
        try:
            leaves = await self.store.leaves(batch.batch_id)
            if len(leaves) != batch.leaf_count:
                raise PermanentTaskError(
                    f"batch {batch.batch_id} has {len(leaves)} leaves, {batch.leaf_count} sealed"
                )
            tree = await asyncio.to_thread(MerkleTree.build, leaves)
            anchor = await anchorer.anchor(tree.root, tree.leaf_count)
            await self.store.record_anchor(batch.batch_id, tree.root, anchor)
        except PermanentTaskError as exc:
            await self.store.record_failure(batch.batch_id, str(exc))
            raise
        except Exception as exc:
            if final_attempt:
                await self.store.record_failure(batch.batch_id, f"{type(exc).__name__}: {exc}")
            raise
        recorded = await self.store.batch(batch.batch_id)
        assert recorded is not None
        return recorded

    async def announce(self, batch: Batch) -> int:
        """One `notarization.anchored` event per project and chunk of the batch (after a reorg
        removed its anchor, `notarization.reanchored`, once per re-anchoring); how many."""
        assert batch.anchor is not None and batch.root is not None
        by_project: dict[str, list[BatchMember]] = {}
        for member in await self.store.members(batch.batch_id):
            by_project.setdefault(member.project_id, []).append(member)
        anchor = batch.anchor
        again = await reanchors(self.store, batch.batch_id)
        kind = EventType.NOTARIZATION_REANCHORED if again else EventType.NOTARIZATION_ANCHORED
        common = {
            "chainId": batch.chain_id,
            "batchId": batch.batch_id,
            "mode": batch.mode.value,
            "root": "0x" + batch.root.hex(),
            "leafCount": batch.leaf_count,
            "contract": anchor.contract,
            "transactionHash": "0x" + anchor.transaction_hash.hex(),
            "blockNumber": anchor.block_number,
            "blockTime": anchor.block_time,
            "anchoredAt": block_time_text(anchor.block_time),
        }
        if again:
            common["reanchors"] = again  # how often a reorg removed its anchor
        sent = 0
        for project_id, members in by_project.items():
            parts = _chunks(members, self.event_chunk)
            for number, part in enumerate(parts, start=1):
                data = {
                    **common,
                    "part": number,
                    "parts": len(parts),
                    "notarizations": [
                        {
                            "id": m.notarization_id,
                            "documentHash": "0x" + m.document_hash.hex(),
                            "label": m.label,
                        }
                        for m in part
                    ],
                }
                key = f"{kind.value}:{batch.batch_id}:{number}" + (f"#{again}" if again else "")
                await self.events.emit(kind, project_id, data, idempotency_key=key)
                sent += 1
        return sent


def _chunks(members: Sequence[BatchMember], size: int) -> list[Sequence[BatchMember]]:
    return [members[i : i + size] for i in range(0, len(members), size)]


def notary_handlers(
    store: NotaryStore, anchorers: Mapping[int, Anchorer], events: EventPublisher
) -> dict[str, AnchorBatchHandler]:
    """The worker's handlers for notarization, to merge into its handler registry."""
    return {ANCHOR_TASK: AnchorBatchHandler(store, anchorers, events)}
