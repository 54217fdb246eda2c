"""Rows of the notarization tables to and from the domain's records."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from sqlalchemy import Row

from entryway.domain.evm import checksum
from entryway.domain.notarization import (
    Batch,
    BatchState,
    Notarization,
    NotarizationKind,
    NotarizationMode,
)
from entryway.domain.proof import AnchorRecord
from entryway.storage.schema import notary_batches as _b
from entryway.storage.tasks import as_utc


def hex_of(value: bytes) -> str:
    return "0x" + value.hex()


def hash_of(value: str) -> bytes:
    return bytes.fromhex(value[2:])


def batch_of(row: Mapping[Any, Any]) -> Batch:
    anchor = None
    if row["transaction_hash"] is not None:
        anchor = AnchorRecord(
            chain_id=row["chain_id"],
            contract=checksum(row["contract"]),
            transaction_hash=hash_of(row["transaction_hash"]),
            block_number=row["block_number"],
            block_time=row["block_time"],
        )
    return Batch(
        batch_id=row["batch_id"],
        chain_id=row["chain_id"],
        mode=NotarizationMode(row["mode"]),
        state=BatchState(row["state"]),
        leaf_count=row["leaf_count"],
        root=None if row["root"] is None else hash_of(row["root"]),
        anchor=anchor,
        created_at=as_utc(row["created_at"]),
        anchored_at=None if row["anchored_at"] is None else as_utc(row["anchored_at"]),
        error=row["error"],
    )


BATCH_COLUMNS = [c.label(f"b_{c.name}") for c in _b.c]


def notarization_of(row: Row[Any]) -> Notarization:
    joined = row._mapping
    batch = None
    if joined["b_batch_id"] is not None:
        batch = batch_of({c.name: joined[f"b_{c.name}"] for c in _b.c})
    return Notarization(
        notarization_id=row.notarization_id,
        project_id=row.project_id,
        chain_id=row.chain_id,
        mode=NotarizationMode(row.mode),
        kind=NotarizationKind(row.kind),
        document_hash=hash_of(row.document_hash),
        data_bytes=row.data_bytes,
        label=row.label,
        metadata=None if row.metadata_json is None else orjson.loads(row.metadata_json),
        filename=row.filename,
        content_type=row.content_type,
        stored=row.stored,
        created_at=as_utc(row.created_at),
        batch=batch,
        leaf_index=row.leaf_index,
    )


def values_of(n: Notarization, key_id: str | None, idempotency_key: str) -> dict[str, Any]:
    return {
        "notarization_id": n.notarization_id,
        "project_id": n.project_id,
        "key_id": key_id,
        "chain_id": n.chain_id,
        "mode": n.mode.value,
        "kind": n.kind.value,
        "document_hash": hex_of(n.document_hash),
        "data_bytes": n.data_bytes,
        "label": n.label,
        "metadata_json": None if n.metadata is None else orjson.dumps(n.metadata).decode(),
        "filename": n.filename,
        "content_type": n.content_type,
        "stored": n.stored,
        "idempotency_key": idempotency_key,
        "batch_id": None if n.batch is None else n.batch.batch_id,
        "leaf_index": n.leaf_index,
        "created_at": n.created_at,
    }
