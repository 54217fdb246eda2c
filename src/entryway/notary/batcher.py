"""The batcher: seals each chain's pending notarizations into batches, and leaves the
anchoring to the durable `notary.anchor` task it queues with each batch.

Every `poll_interval` it looks at each chain: a batch is sealed as soon as `batch_size`
hashes wait (as many full batches as there are), or when the oldest pending hash has waited
`batch_interval` seconds (then all that wait, up to `batch_size`). Sealing is one
transaction (the batch, its leaves, its task), so a batcher that dies leaves either nothing
done (the hashes still pending, sealed by the next look) or a batch whose task any worker
runs. Several batchers may run against one database: sealing never gives a hash to two
batches.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from datetime import timedelta

from sqlalchemy.exc import SQLAlchemyError

from entryway.domain.notarization import Batch, NotarySettings
from entryway.storage.notary import NotaryStore
from entryway.storage.tasks import Clock, utc_now
from entryway.waiting import woken

log = logging.getLogger("entryway.notary.batcher")


class Batcher:
    def __init__(
        self,
        store: NotaryStore,
        chains: Iterable[int],
        settings: NotarySettings | None = None,
        *,
        clock: Clock = utc_now,
    ) -> None:
        self.store = store
        self.chains = tuple(sorted(set(chains)))
        self.settings = settings or NotarySettings()
        self.clock = clock
        self._stopping = asyncio.Event()

    async def tick(self) -> list[Batch]:
        """Seal what is due on every chain now; the batches sealed."""
        sealed: list[Batch] = []
        for chain_id in self.chains:
            sealed.extend(await self.seal_due(chain_id))
        return sealed

    async def seal_due(self, chain_id: int) -> list[Batch]:
        size = self.settings.batch_size
        interval = timedelta(seconds=self.settings.batch_interval)
        sealed: list[Batch] = []
        while True:
            pending = await self.store.pending(chain_id, size)
            if pending.count == 0 or pending.oldest is None:
                return sealed
            full = pending.count >= size
            if not full and self.clock() - pending.oldest < interval:
                return sealed
            batch = await self.store.seal(chain_id, size)
            if batch is None:
                return sealed
            log.info("chain %d: sealed batch %s of %d", chain_id, batch.batch_id, batch.leaf_count)
            sealed.append(batch)
            if not full:
                return sealed

    async def run(self) -> None:
        """Tick every `poll_interval` seconds until stop(); a failed tick is logged and
        retried at the next one."""
        while not self._stopping.is_set():
            try:
                await self.tick()
            except (SQLAlchemyError, OSError):
                log.warning("sealing notary batches failed; retrying", exc_info=True)
            await woken(self._stopping, self.settings.poll_interval)

    def stop(self) -> None:
        self._stopping.set()


@asynccontextmanager
async def running_batcher(
    store: NotaryStore, chains: Iterable[int], settings: NotarySettings | None = None
) -> AsyncIterator[Batcher]:
    """The batcher running in the background of this event loop for the block's duration."""
    batcher = Batcher(store, chains, settings)
    job = asyncio.create_task(batcher.run(), name="entryway-notary-batcher")
    try:
        yield batcher
    finally:
        batcher.stop()
        await job
