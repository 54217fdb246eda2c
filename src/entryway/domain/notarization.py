"""Notarizations as the service keeps them, pure: what a project submits, the batch whose
root anchors it, the settings that decide when a batch is sealed, and the request-level
rules (idempotency keys, the price of a request). No database, no chain."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

import orjson

from entryway.domain.merkle import max_path_length
from entryway.domain.pricebook import OperationType, PriceBook, Quote
from entryway.domain.proof import AnchorRecord
from entryway.errors import EntrywayError

ANCHOR_TASK = "notary.anchor"
HASH_BYTES = 32
MIB = 1024 * 1024


class NotarizationError(EntrywayError):
    """A notarization request the service refuses."""


class RequestKeyReusedError(NotarizationError):
    """An idempotency key already names another request of the project."""


class NotarizationMode(StrEnum):
    BATCHED = "batched"  # waits for its chain's next batch: one transaction for many hashes
    DIRECT = "direct"  # the request's hashes are anchored at once, in a tree of their own


class NotarizationKind(StrEnum):
    HASH = "hash"  # the client sent the document's SHA-256
    DOCUMENT = "document"  # the client uploaded the document; the service hashed it


class NotarizationStatus(StrEnum):
    PENDING = "pending"
    ANCHORED = "anchored"
    FAILED = "failed"


class BatchState(StrEnum):
    SEALED = "sealed"  # its leaves are fixed; the anchoring task is queued or running
    ANCHORED = "anchored"
    FAILED = "failed"  # every attempt to anchor failed


@dataclass(frozen=True, slots=True)
class NotarySettings:
    batch_size: int = 10_000  # a batch is sealed when this many hashes wait...
    batch_interval: float = 10.0  # ...or when the oldest has waited this many seconds
    poll_interval: float = 0.5  # how often the batcher looks
    max_document_bytes: int = 25 * MIB
    max_bulk: int = 1_000  # hashes in one bulk request
    proof_cache_trees: int = 8  # built trees kept in memory to hand out proofs

    def __post_init__(self) -> None:
        if self.batch_size < 1 or self.max_bulk < 1 or self.max_document_bytes < 1:
            raise ValueError("batch size, bulk size and document size must be positive")
        if self.batch_interval <= 0 or self.poll_interval <= 0:
            raise ValueError("batch and poll intervals must be positive")


@dataclass(frozen=True, slots=True)
class NewNotarization:
    """One hash to notarize, as submitted."""

    document_hash: bytes
    data_bytes: int  # the document's size; HASH_BYTES when only the hash was sent
    kind: NotarizationKind = NotarizationKind.HASH
    label: str | None = None
    metadata: Mapping[str, Any] | None = None
    filename: str | None = None
    content_type: str | None = None
    document: bytes | None = None  # kept only when the project asked (store: true)

    def __post_init__(self) -> None:
        if len(self.document_hash) != HASH_BYTES:
            raise NotarizationError("a document hash is 32 bytes")


@dataclass(frozen=True, slots=True)
class Batch:
    batch_id: str
    chain_id: int
    mode: NotarizationMode
    state: BatchState
    leaf_count: int
    root: bytes | None
    anchor: AnchorRecord | None  # set once anchored
    created_at: datetime
    anchored_at: datetime | None
    error: str | None


@dataclass(frozen=True, slots=True)
class Notarization:
    notarization_id: str
    project_id: str
    chain_id: int
    mode: NotarizationMode
    kind: NotarizationKind
    document_hash: bytes
    data_bytes: int
    label: str | None
    metadata: Mapping[str, Any] | None
    filename: str | None
    content_type: str | None
    stored: bool
    created_at: datetime
    batch: Batch | None  # None: waiting for its chain's next batch
    leaf_index: int | None

    @property
    def status(self) -> NotarizationStatus:
        if self.batch is None or self.batch.state is BatchState.SEALED:
            return NotarizationStatus.PENDING
        if self.batch.state is BatchState.ANCHORED:
            return NotarizationStatus.ANCHORED
        return NotarizationStatus.FAILED


@dataclass(frozen=True, slots=True)
class BatchMember:
    """A notarization of an anchored batch, for the project's `notarization.anchored` event."""

    project_id: str
    notarization_id: str
    document_hash: bytes
    label: str | None


def verification_steps(item: NewNotarization, request_size: int) -> int:
    """The checks that make `item` verifiable, which its data size factor is multiplied by:
    one for its leaf against the anchored root; one more when the service hashed an uploaded
    document; and, in a request of several hashes, one per level of the Merkle tree the
    request's hashes form (ceil(log2 n), the most proof steps tying the item to the others)."""
    hashing = 1 if item.kind is NotarizationKind.DOCUMENT else 0
    return 1 + hashing + max_path_length(max(request_size, 1))


def request_quote(prices: PriceBook, items: Sequence[NewNotarization]) -> Quote:
    """What a request costs: the sum of its notarizations, each the notarization fee plus
    the data size factor x its verification steps (`verification_steps`)."""
    totals: dict[str, int] = {}
    for item in items:
        quote = prices.notarization_quote(
            data_bytes=item.data_bytes, verification_steps=verification_steps(item, len(items))
        )
        for component, credits in quote.breakdown:
            totals[component] = totals.get(component, 0) + credits
    return Quote.of(OperationType.NOTARIZATION, **totals)


def request_digest(
    endpoint: str, chain_id: int, mode: NotarizationMode, items: Sequence[NewNotarization]
) -> str:
    """SHA-256 (hex) of everything a request asks: its endpoint (hash, document, bulk), chain,
    mode and items, each with what the service records of it. Two requests with one digest
    are the same request: a retry. A request without an idempotency key is named by it."""
    digest = hashlib.sha256(f"{endpoint}|{chain_id}|{mode.value}|{len(items)}".encode())
    for item in items:
        digest.update(item.document_hash)
        fields = [
            item.kind.value,
            item.data_bytes,
            item.label,
            item.metadata,
            item.filename,
            item.content_type,
            item.document is not None,
        ]
        # Length-prefixed: no item's text can pose as the start of the next item.
        encoded = orjson.dumps(fields, option=orjson.OPT_SORT_KEYS)
        digest.update(len(encoded).to_bytes(8, "big") + encoded)
    return digest.hexdigest()
