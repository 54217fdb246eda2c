"""Request and response bodies of the notarization API (camelCase on the wire)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import Field

from entryway.domain.notarization import (
    Notarization,
    NotarizationKind,
    NotarizationMode,
    NotarizationStatus,
)
from entryway.domain.proof import InclusionProof
from entryway.notary.verify import block_time_text
from entryway.service.schemas import Body, ChainId, Label, MetadataKey, Wire

HashHex = Annotated[
    str,
    Field(
        pattern=r"^0x[0-9a-fA-F]{64}$",
        description="SHA-256 of the document, 32 bytes as 0x-hex",
        examples=["0x2e7d2c03a9507ae265ecf5b5356885a53393a2029d241394997265a1a25aefc6"],
    ),
]


class HashItemIn(Body):
    document_hash: HashHex
    label: Label | None = None
    metadata: dict[MetadataKey, Any] | None = None


class NotarizeHashIn(HashItemIn):
    chain_id: ChainId
    mode: NotarizationMode = NotarizationMode.BATCHED


class NotarizeBulkIn(Body):
    chain_id: ChainId
    mode: NotarizationMode = NotarizationMode.BATCHED
    items: list[HashItemIn] = Field(min_length=1)


class AnchorOut(Wire):
    root: str
    leaf_count: int
    contract: str
    transaction_hash: str
    block_number: int
    block_time: int  # Unix seconds
    anchored_at: str  # the block time, ISO 8601


class NotarizationOut(Wire):
    id: str
    chain_id: int
    mode: NotarizationMode
    kind: NotarizationKind
    status: NotarizationStatus
    document_hash: str
    data_bytes: int
    label: str | None
    metadata: dict[str, Any] | None
    filename: str | None
    content_type: str | None
    stored: bool  # the document is kept: GET …/document returns it
    created_at: datetime
    batch_id: str | None
    anchor: AnchorOut | None
    proof: dict[str, Any] | None  # the entryway-proof/1 document, once anchored
    error: str | None  # why anchoring failed

    @classmethod
    def of(cls, n: Notarization, proof: InclusionProof | None) -> NotarizationOut:
        batch = n.batch
        anchor = None
        if batch is not None and batch.anchor is not None and batch.root is not None:
            anchor = AnchorOut(
                root="0x" + batch.root.hex(),
                leaf_count=batch.leaf_count,
                contract=batch.anchor.contract,
                transaction_hash="0x" + batch.anchor.transaction_hash.hex(),
                block_number=batch.anchor.block_number,
                block_time=batch.anchor.block_time,
                anchored_at=block_time_text(batch.anchor.block_time),
            )
        return cls(
            id=n.notarization_id,
            chain_id=n.chain_id,
            mode=n.mode,
            kind=n.kind,
            status=n.status,
            document_hash="0x" + n.document_hash.hex(),
            data_bytes=n.data_bytes,
            label=n.label,
            metadata=None if n.metadata is None else dict(n.metadata),
            filename=n.filename,
            content_type=n.content_type,
            stored=n.stored,
            created_at=n.created_at,
            batch_id=None if batch is None else batch.batch_id,
            anchor=anchor,
            proof=None if proof is None else proof.to_dict(),
            error=batch.error
            if batch is not None and n.status is NotarizationStatus.FAILED
            else None,
        )


class NotarizationAccepted(NotarizationOut):
    credits: int  # what the request cost (charged once per idempotency key)


class NotarizationRef(Wire):
    id: str
    document_hash: str
    status: NotarizationStatus


class BulkAccepted(Wire):
    chain_id: int
    mode: NotarizationMode
    count: int
    credits: int
    notarizations: list[NotarizationRef]  # in the order of the request's items
