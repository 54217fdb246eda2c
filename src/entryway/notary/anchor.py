"""Anchoring a batch's Merkle root in NotaryAnchor, and the proofs of an anchored batch.

No database here: the service decides what goes in a batch and stores what comes back.
Anchoring is idempotent: a root already on chain (a retried task whose transaction was
mined before a crash) is found and returned, not sent again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass

from entryway.chain.rpc import RpcError, TransactionFailedError
from entryway.chain.transactor import Transactor
from entryway.domain.evm import checksum, hex_to_bytes
from entryway.domain.merkle import HASH_BYTES, MerkleTree
from entryway.domain.proof import MAX_LEAF_COUNT, AnchorRecord, InclusionProof, proof_for_leaf
from entryway.errors import EntrywayError
from entryway.notary.contract import anchor_of, anchored_event, anchored_logs, notary_abi


class AnchorError(EntrywayError):
    """A root could not be anchored, or its anchor could not be read back."""


@dataclass(frozen=True, slots=True)
class AnchoredBatch:
    """A tree whose root is on chain: everything needed to hand out proofs."""

    tree: MerkleTree
    anchor: AnchorRecord

    def proof(self, index: int) -> InclusionProof:
        return proof_for_leaf(self.tree, index, self.anchor)

    def proofs(self) -> list[InclusionProof]:
        return batch_proofs(self.tree, self.anchor)


def batch_proofs(tree: MerkleTree, anchor: AnchorRecord) -> list[InclusionProof]:
    """The proof of every leaf of `tree`, in leaf order."""
    return [proof_for_leaf(tree, i, anchor) for i in range(tree.leaf_count)]


class Anchorer:
    """Sends `NotaryAnchor.anchor(root, leafCount)` from the notary submitter's key.

    `transactor` must hold a key the contract accepts as submitter. Anchors from one
    Anchorer go one at a time (the transactor manages no nonces across concurrent sends).
    """

    def __init__(self, transactor: Transactor, notary: str) -> None:
        self.transactor = transactor
        self.notary = checksum(notary)
        self._lock = asyncio.Lock()

    async def anchor(self, root: bytes, leaf_count: int) -> AnchorRecord:
        """Anchor `root` (or find it anchored already); returns where and when it landed."""
        if len(root) != HASH_BYTES or root == bytes(HASH_BYTES):
            raise AnchorError("a root is 32 bytes, not all zero")
        if not 1 <= leaf_count <= MAX_LEAF_COUNT:
            raise AnchorError(f"leaf count must be between 1 and {MAX_LEAF_COUNT}")
        async with self._lock:
            existing = await self.find(root)
            if existing is not None:
                return existing
            data = notary_abi().encode_call("anchor", root, leaf_count)
            try:
                receipt = await self.transactor.send(self.notary, data)
            except (RpcError, TransactionFailedError) as exc:
                # Someone else may have anchored the same root meanwhile: that is success.
                raced = await self.find(root)
                if raced is not None:
                    return raced
                raise AnchorError(f"anchoring 0x{root.hex()} failed: {exc}") from exc
        event = anchored_event(receipt.logs, self.notary, root)
        if event is None:
            raise AnchorError(f"transaction {receipt.tx_hash} emitted no Anchored event")
        return AnchorRecord(
            chain_id=self.transactor.chain_id,
            contract=self.notary,
            transaction_hash=hex_to_bytes(receipt.tx_hash),
            block_number=receipt.block_number,
            block_time=int(event["timestamp"]),
        )

    async def find(self, root: bytes) -> AnchorRecord | None:
        """The existing anchor of `root`, read back from the contract and its event."""
        eth = self.transactor.eth
        on_chain = await anchor_of(eth, self.notary, root)
        if not on_chain.anchored:
            return None
        logs = await anchored_logs(eth, self.notary, root, on_chain.block_number)
        if not logs:
            raise AnchorError(
                f"0x{root.hex()} is anchored in block {on_chain.block_number}, "
                "but the node returns no Anchored log for it"
            )
        return AnchorRecord(
            chain_id=self.transactor.chain_id,
            contract=self.notary,
            transaction_hash=hex_to_bytes(logs[0].tx_hash),
            block_number=on_chain.block_number,
            block_time=on_chain.timestamp,
        )

    async def anchor_batch(self, document_hashes: Iterable[bytes]) -> AnchoredBatch:
        """Build the tree of `document_hashes` (off the event loop) and anchor its root."""
        hashes = tuple(document_hashes)
        tree = await asyncio.to_thread(MerkleTree.build, hashes)
        anchor = await self.anchor(tree.root, tree.leaf_count)
        return AnchoredBatch(tree, anchor)
