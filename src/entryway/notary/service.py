"""The notarization use cases behind the API: take hashes in, hand notarizations, proofs and
kept documents out. Charging is the API's job (it holds the meter); anchoring is the
worker's (`entryway.notary.anchoring`), batching the batcher's (`entryway.notary.batcher`).

Proofs are not stored one by one: a notarization's proof is read off its batch's tree, which
is rebuilt from the batch's leaves (in leaf order) the first time one of its proofs is asked
for and then kept in a small in-memory cache, so the proofs of one batch cost one build.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Iterable, Sequence

from entryway.domain.merkle import MerkleTree
from entryway.domain.notarization import (
    NewNotarization,
    Notarization,
    NotarizationError,
    NotarizationMode,
    NotarizationStatus,
    NotarySettings,
)
from entryway.domain.proof import InclusionProof
from entryway.storage.notary import NotaryStore, Submitted


class NotaryUnavailableError(NotarizationError):
    """This service anchors nothing on that chain (no NotaryAnchor or notary key for it)."""


class Notary:
    def __init__(
        self,
        store: NotaryStore,
        chains: Iterable[int],
        settings: NotarySettings | None = None,
    ) -> None:
        self.store = store
        self.chains = frozenset(chains)
        self.settings = settings or NotarySettings()
        self._trees: OrderedDict[str, MerkleTree] = OrderedDict()
        self._building: dict[str, asyncio.Lock] = {}

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
        """Record a request's notarizations, once per `request_key` (RequestKeyReusedError
        when the key named a request with another `digest`)."""
        if chain_id not in self.chains:
            raise NotaryUnavailableError(f"this service does not anchor on chain {chain_id}")
        if not 1 <= len(items) <= self.settings.max_bulk:
            raise NotarizationError(f"a request holds 1 to {self.settings.max_bulk} hashes")
        return await self.store.submit(
            project_id, key_id, chain_id, mode, items, request_key, digest=digest
        )

    async def get(self, project_id: str, notarization_id: str) -> Notarization | None:
        return await self.store.get(project_id, notarization_id)

    async def many(self, project_id: str, notarization_ids: Sequence[str]) -> list[Notarization]:
        return await self.store.many(project_id, notarization_ids)

    async def document(self, project_id: str, notarization_id: str) -> bytes | None:
        return await self.store.document(project_id, notarization_id)

    async def proof(self, notarization: Notarization) -> InclusionProof | None:
        """The proof of an anchored notarization; None while pending or if it failed."""
        batch = notarization.batch
        if notarization.status is not NotarizationStatus.ANCHORED or batch is None:
            return None
        assert batch.anchor is not None and batch.root is not None
        assert notarization.leaf_index is not None
        if batch.leaf_count == 1:
            path: tuple[bytes, ...] = ()
        else:
            tree = await self._tree(batch.batch_id, batch.root)
            path = tree.path(notarization.leaf_index)
        return InclusionProof(
            leaf=notarization.document_hash,
            path=path,
            root=batch.root,
            leaf_count=batch.leaf_count,
            anchor=batch.anchor,
        )

    async def _tree(self, batch_id: str, root: bytes) -> MerkleTree:
        tree = self._trees.get(batch_id)
        if tree is not None:
            self._trees.move_to_end(batch_id)
            return tree
        lock = self._building.setdefault(batch_id, asyncio.Lock())
        async with lock:
            tree = self._trees.get(batch_id)
            if tree is None:
                leaves = await self.store.leaves(batch_id)
                tree = await asyncio.to_thread(MerkleTree.build, leaves)
                if tree.root != root:
                    raise NotarizationError(
                        f"batch {batch_id}: its leaves make root 0x{tree.root.hex()}, "
                        f"not the anchored 0x{root.hex()}"
                    )
                self._trees[batch_id] = tree
                while len(self._trees) > self.settings.proof_cache_trees:
                    self._trees.popitem(last=False)
        self._building.pop(batch_id, None)
        return tree
