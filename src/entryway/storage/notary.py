"""Notarizations and their batches in the database (SQLite or PostgreSQL).

A request's notarizations are written in one transaction; in direct mode their batch and
its anchoring task go in the same one. Batched notarizations wait with no batch until the
batcher seals one: a single statement claims up to `batch_size` of a chain's oldest pending
rows (`FOR UPDATE SKIP LOCKED` on PostgreSQL, so concurrent batchers never share a row) and
numbers them as leaves, in arrival order (created_at, notarization_id); the batch row and
its task are committed with them.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from entryway.domain.evm import checksum
from entryway.domain.notarization import (
    ANCHOR_TASK,
    Batch,
    BatchMember,
    BatchState,
    NewNotarization,
    Notarization,
    NotarizationMode,
    RequestKeyReusedError,
)
from entryway.domain.proof import AnchorRecord
from entryway.storage.notary_rows import (
    BATCH_COLUMNS,
    batch_of,
    hash_of,
    hex_of,
    notarization_of,
    values_of,
)
from entryway.storage.schema import notarizations as _n
from entryway.storage.schema import notary_batches as _b
from entryway.storage.schema import notary_documents
from entryway.storage.tasks import Clock, TaskQueue, as_utc, utc_now

# Anchoring retries for a while (a node away, a nonce race between workers), then gives up.
ANCHOR_MAX_ATTEMPTS = 12


@dataclass(frozen=True, slots=True)
class Submitted:
    notarization_ids: tuple[str, ...]  # in request order
    replayed: bool  # the request's idempotency key was seen before: nothing new was written
    written: tuple[Notarization, ...] = ()  # what was written now (empty for a replay)


@dataclass(frozen=True, slots=True)
class Pending:
    count: int  # capped at the limit asked
    oldest: datetime | None


class _NothingToSealError(Exception):
    """No pending notarization: the empty batch is rolled back."""


class NotaryStore:
    def __init__(
        self, engine: AsyncEngine, *, queue: TaskQueue | None = None, clock: Clock = utc_now
    ) -> None:
        self.engine = engine
        self.clock = clock
        self.queue = queue or TaskQueue(engine, clock=clock)

    # ----------------------------------------------------------------- intake

    async def submit(
        self,
        project_id: str,
        key_id: str | None,
        chain_id: int,
        mode: NotarizationMode,
        items: Sequence[NewNotarization],
        request_key: str,
        *,
        digest: str,
    ) -> Submitted:
        """Write a request's notarizations (and, in direct mode, their batch and its task),
        once per `request_key`: the same key with the same request `digest` again returns
        the first request's ids; with another digest it is RequestKeyReusedError."""
        # The first row holds the key itself, whatever the request's size: one key, one
        # request, so a bulk request and a single one cannot share a key.
        keys = [request_key, *(f"{request_key}#{i}" for i in range(1, len(items)))]
        try:
            async with self.engine.begin() as db:
                written = await self._insert(
                    db, project_id, key_id, chain_id, mode, items, keys, digest
                )
        except IntegrityError:
            # The key was used before (a retry, or the same request concurrently): the
            # first request's rows are the answer. Trying the insert first keeps the usual
            # case, a new request, to one transaction.
            earlier = await self._by_keys(project_id, keys, digest)
            if earlier is None:
                raise
            return Submitted(earlier, True)
        return Submitted(tuple(n.notarization_id for n in written), False, written)

    async def _by_keys(
        self, project_id: str, keys: Sequence[str], digest: str
    ) -> tuple[str, ...] | None:
        """The ids written under these keys, or None if the first was never used (a
        request's rows are written together, so the first tells for all)."""
        async with self.engine.connect() as db:
            first = (
                await db.execute(
                    select(_n.c.notarization_id, _n.c.request_digest).where(
                        _n.c.project_id == project_id, _n.c.idempotency_key == keys[0]
                    )
                )
            ).one_or_none()
            if first is None:
                return None
            if first.request_digest != digest:
                raise RequestKeyReusedError(
                    "this idempotency key was used for a different request: send a new key "
                    "for a new request, the same request to retry"
                )
            if len(keys) == 1:
                return (str(first.notarization_id),)
            rows = await db.execute(
                select(_n.c.idempotency_key, _n.c.notarization_id).where(
                    _n.c.project_id == project_id, _n.c.idempotency_key.in_(keys)
                )
            )
            found = {r.idempotency_key: r.notarization_id for r in rows}
        # The same digest is the same number of items, all written in one transaction.
        return tuple(found[k] for k in keys)

    async def _insert(
        self,
        db: AsyncConnection,
        project_id: str,
        key_id: str | None,
        chain_id: int,
        mode: NotarizationMode,
        items: Sequence[NewNotarization],
        keys: Sequence[str],
        digest: str,
    ) -> tuple[Notarization, ...]:
        now = self.clock()
        batch = None
        if mode is NotarizationMode.DIRECT:
            batch_id = await self._newbatch_of(db, chain_id, mode, len(items), now)
            batch = Batch(
                batch_id, chain_id, mode, BatchState.SEALED, len(items), None, None, now, None, None
            )
        written = tuple(
            Notarization(
                notarization_id=str(uuid.uuid4()),
                project_id=project_id,
                chain_id=chain_id,
                mode=mode,
                kind=item.kind,
                document_hash=item.document_hash,
                data_bytes=item.data_bytes,
                label=item.label,
                metadata=item.metadata,
                filename=item.filename,
                content_type=item.content_type,
                stored=item.document is not None,
                created_at=now,
                batch=batch,
                leaf_index=None if batch is None else i,
            )
            for i, item in enumerate(items)
        )
        rows = [
            values_of(n, key_id, k) | {"request_digest": digest}
            for n, k in zip(written, keys, strict=True)
        ]
        await db.execute(insert(_n), rows)
        documents = [
            {"notarization_id": n.notarization_id, "content": item.document, "created_at": now}
            for n, item in zip(written, items, strict=True)
            if item.document is not None
        ]
        if documents:
            await db.execute(insert(notary_documents), documents)
        if batch is not None:
            await self._queue_anchoring(db, batch.batch_id, chain_id)
        return written

    async def _newbatch_of(
        self, db: AsyncConnection, chain_id: int, mode: NotarizationMode, leaves: int, now: datetime
    ) -> str:
        batch_id = str(uuid.uuid4())
        await db.execute(
            insert(_b).values(
                batch_id=batch_id,
                chain_id=chain_id,
                mode=mode.value,
                state=BatchState.SEALED.value,
                leaf_count=leaves,
                created_at=now,
            )
        )
        return batch_id

    async def _queue_anchoring(self, db: AsyncConnection, batch_id: str, chain_id: int) -> None:
        task_id = await self.queue.enqueue_in(
            db,
            ANCHOR_TASK,
            {"batchId": batch_id, "chainId": chain_id},
            project_id=None,
            idempotency_key=batch_id,
            max_attempts=ANCHOR_MAX_ATTEMPTS,
        )
        await db.execute(update(_b).where(_b.c.batch_id == batch_id).values(task_id=task_id))

    # ---------------------------------------------------------------- batching

    async def pending(self, chain_id: int, limit: int) -> Pending:
        """How many of the chain's batched notarizations wait (at most `limit`), and since
        when the oldest has."""
        waiting = (_n.c.batch_id.is_(None), _n.c.chain_id == chain_id)
        async with self.engine.connect() as db:
            capped = select(_n.c.notarization_id).where(*waiting).limit(limit).subquery()
            count = await db.scalar(select(func.count()).select_from(capped))
            oldest = await db.scalar(select(func.min(_n.c.created_at)).where(*waiting))
        return Pending(int(count or 0), None if oldest is None else as_utc(oldest))

    async def seal(self, chain_id: int, max_leaves: int) -> Batch | None:
        """Make a batch of up to `max_leaves` of the chain's oldest pending notarizations
        and queue its anchoring, all in one transaction; None if none waits."""
        try:
            return await self._seal(chain_id, max_leaves)
        except _NothingToSealError:
            return None

    async def _seal(self, chain_id: int, max_leaves: int) -> Batch:
        now = self.clock()
        async with self.engine.begin() as db:
            batch_id = await self._newbatch_of(db, chain_id, NotarizationMode.BATCHED, 0, now)
            # CTEs, each evaluated once: as an IN (subquery), PostgreSQL may run the locking
            # subquery again per row, skipping the rows this statement already changed, so
            # the LIMIT would let more through. Window functions cannot lock: ranked apart.
            oldest = (
                select(_n.c.notarization_id, _n.c.created_at)
                .where(_n.c.batch_id.is_(None), _n.c.chain_id == chain_id)
                .order_by(_n.c.created_at, _n.c.notarization_id)
                .limit(max_leaves)
                .with_for_update(skip_locked=True)
                .cte("oldest")
            )
            position = func.row_number().over(
                order_by=(oldest.c.created_at, oldest.c.notarization_id)
            )
            ranked = select(oldest.c.notarization_id, (position - 1).label("position")).cte(
                "ranked"
            )
            await db.execute(
                update(_n)
                .where(_n.c.notarization_id == ranked.c.notarization_id, _n.c.batch_id.is_(None))
                .values(batch_id=batch_id, leaf_index=ranked.c.position)
            )
            # Counted, not read from rowcount: SQLite reports none for a statement with WITH.
            leaves = int(
                await db.scalar(select(func.count()).where(_n.c.batch_id == batch_id)) or 0
            )
            if leaves == 0:
                raise _NothingToSealError
            await db.execute(update(_b).where(_b.c.batch_id == batch_id).values(leaf_count=leaves))
            await self._queue_anchoring(db, batch_id, chain_id)
            row = (await db.execute(select(_b).where(_b.c.batch_id == batch_id))).one()
        return batch_of(row._mapping)

    # --------------------------------------------------------------- anchoring

    async def batch(self, batch_id: str) -> Batch | None:
        async with self.engine.connect() as db:
            row = (await db.execute(select(_b).where(_b.c.batch_id == batch_id))).one_or_none()
        return None if row is None else batch_of(row._mapping)

    async def leaves(self, batch_id: str) -> list[bytes]:
        """The batch's document hashes in leaf order: the tree's leaves."""
        async with self.engine.connect() as db:
            rows = await db.execute(
                select(_n.c.document_hash)
                .where(_n.c.batch_id == batch_id)
                .order_by(_n.c.leaf_index)
            )
            return [hash_of(h) for (h,) in rows]

    async def record_anchor(self, batch_id: str, root: bytes, anchor: AnchorRecord) -> bool:
        """Mark the batch anchored by `anchor`; False if it was already recorded."""
        async with self.engine.begin() as db:
            result = await db.execute(
                update(_b)
                .where(_b.c.batch_id == batch_id, _b.c.state == BatchState.SEALED.value)
                .values(
                    state=BatchState.ANCHORED.value,
                    root=hex_of(root),
                    contract=checksum(anchor.contract),
                    transaction_hash=hex_of(anchor.transaction_hash),
                    block_number=anchor.block_number,
                    block_time=anchor.block_time,
                    anchored_at=self.clock(),
                    error=None,
                )
            )
        return result.rowcount == 1

    async def record_failure(self, batch_id: str, error: str) -> None:
        """Every attempt failed: the batch, and so its notarizations, failed."""
        async with self.engine.begin() as db:
            await db.execute(
                update(_b)
                .where(_b.c.batch_id == batch_id, _b.c.state == BatchState.SEALED.value)
                .values(state=BatchState.FAILED.value, error=error[:2000])
            )

    async def members(self, batch_id: str) -> list[BatchMember]:
        """The batch's notarizations, by project then leaf order."""
        async with self.engine.connect() as db:
            rows = await db.execute(
                select(_n.c.project_id, _n.c.notarization_id, _n.c.document_hash, _n.c.label)
                .where(_n.c.batch_id == batch_id)
                .order_by(_n.c.project_id, _n.c.leaf_index)
            )
            return [
                BatchMember(r.project_id, r.notarization_id, hash_of(r.document_hash), r.label)
                for r in rows
            ]

    # -------------------------------------------------------------------- reads

    async def get(self, project_id: str, notarization_id: str) -> Notarization | None:
        """A project's notarization with its batch; another project's is None."""
        found = await self.many(project_id, [notarization_id])
        return found[0] if found else None

    async def many(self, project_id: str, notarization_ids: Sequence[str]) -> list[Notarization]:
        """These notarizations of the project, in the order asked (unknown ids left out)."""
        query = (
            select(_n, *BATCH_COLUMNS)
            .select_from(_n.outerjoin(_b, _b.c.batch_id == _n.c.batch_id))
            .where(_n.c.project_id == project_id, _n.c.notarization_id.in_(notarization_ids))
        )
        async with self.engine.connect() as db:
            found = {r.notarization_id: notarization_of(r) for r in await db.execute(query)}
        return [found[i] for i in notarization_ids if i in found]

    async def document(self, project_id: str, notarization_id: str) -> bytes | None:
        """The document kept for a notarization of the project (store: true), else None."""
        query = (
            select(notary_documents.c.content)
            .select_from(
                notary_documents.join(
                    _n, _n.c.notarization_id == notary_documents.c.notarization_id
                )
            )
            .where(_n.c.project_id == project_id, _n.c.notarization_id == notarization_id)
        )
        async with self.engine.connect() as db:
            content = await db.scalar(query)
        return None if content is None else bytes(content)
