"""Notarization through the service: documents and hashes in (`/v1/notarizations`), handles
out, whose proofs arrive once the service anchors their batch (docs/notary.md).

Requests are retried after transport errors and 502/503/504: the service answers a repeated
request (same content, or same `Idempotency-Key`) with the first answer and charges once."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, overload

from eth_utils.address import to_checksum_address

from entryway_sdk.errors import (
    ApiError,
    EntrywayError,
    NotarizationFailedError,
    NotarizationTimeoutError,
)
from entryway_sdk.proof import Proof
from entryway_sdk.transport import ServiceApi

NotarizationMode = Literal["batched", "direct"]
HashLike = bytes | str
_HEX64 = re.compile(r"(0x)?[0-9a-fA-F]{64}")
_PATH = "/v1/notarizations"


def hash_hex(value: HashLike) -> str:
    """A document's SHA-256 as the API takes it (`0x` + 64 lower-case hex), from 32 bytes or
    hex with or without `0x` (what `sha256sum` prints)."""
    if isinstance(value, bytes | bytearray):
        if len(value) != 32:
            raise ValueError(
                f"a document hash is 32 bytes (SHA-256), not {len(value)}: to notarize the "
                "document itself use notarize_document, or hash it with document_hash(data)"
            )
        return "0x" + bytes(value).hex()
    if isinstance(value, str) and _HEX64.fullmatch(value):
        return "0x" + value.removeprefix("0x").lower()
    raise ValueError(f"a document hash is 32 bytes or 64 hex digits, not {value!r:.80}")


def check_mode(mode: str) -> NotarizationMode:
    if mode == "batched":
        return "batched"
    if mode == "direct":
        return "direct"
    raise ValueError(f"mode is 'batched' or 'direct', not {mode!r}")


@dataclass(frozen=True, slots=True)
class NotarizationItem:
    """One hash of a bulk request, with its own label and metadata."""

    document_hash: HashLike
    label: str | None = None
    metadata: Mapping[str, Any] | None = None

    def to_wire(self) -> dict[str, Any]:
        item: dict[str, Any] = {"documentHash": hash_hex(self.document_hash)}
        if self.label is not None:
            item["label"] = self.label
        if self.metadata is not None:
            item["metadata"] = dict(self.metadata)
        return item


NotarizationItemLike = NotarizationItem | HashLike | Mapping[str, Any]


def as_item(value: NotarizationItemLike) -> NotarizationItem:
    """An item from itself, a bare hash, or a dict `{"document_hash", "label"?, "metadata"?}`."""
    if isinstance(value, NotarizationItem):
        return value
    if isinstance(value, bytes | bytearray | str):
        return NotarizationItem(value if isinstance(value, str) else bytes(value))
    unknown = set(value) - {"document_hash", "label", "metadata"}
    if unknown or "document_hash" not in value:
        raise ValueError(
            f"a notarization item has document_hash, label?, metadata?; got {sorted(value)}"
        )
    return NotarizationItem(value["document_hash"], value.get("label"), value.get("metadata"))


@dataclass(frozen=True, slots=True)
class Anchor:
    """Where and when a notarization's batch root was anchored."""

    root: str
    leaf_count: int
    contract: str
    transaction_hash: str
    block_number: int
    block_time: int  # Unix seconds
    anchored_at: datetime | None

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> Anchor:
        at = raw.get("anchoredAt")
        return cls(
            root=str(raw["root"]).lower(),
            leaf_count=int(raw["leafCount"]),
            contract=to_checksum_address(raw["contract"]),
            transaction_hash=str(raw["transactionHash"]).lower(),
            block_number=int(raw["blockNumber"]),
            block_time=int(raw["blockTime"]),
            anchored_at=None if at is None else datetime.fromisoformat(at.replace("Z", "+00:00")),
        )


@dataclass(frozen=True, slots=True)
class NotarizationStatus:
    """`GET /v1/notarizations/{id}`: `status` is pending, anchored or failed (then `error`
    says why); once anchored, `anchor` and `proof`. `credits` is what the request that made
    it cost, on the answer to that request (None on later reads)."""

    id: str
    chain_id: int
    mode: str
    kind: str  # hash or document
    status: str
    document_hash: str
    data_bytes: int
    label: str | None
    metadata: Mapping[str, Any] | None
    filename: str | None
    content_type: str | None
    stored: bool
    created_at: datetime | None
    batch_id: str | None
    anchor: Anchor | None
    proof: Proof | None
    error: str | None
    credits: int | None = None

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> NotarizationStatus:
        created = raw.get("createdAt")
        anchor, proof = raw.get("anchor"), raw.get("proof")
        return cls(
            id=str(raw["id"]),
            chain_id=int(raw["chainId"]),
            mode=str(raw.get("mode", "")),
            kind=str(raw.get("kind", "")),
            status=str(raw["status"]),
            document_hash=str(raw["documentHash"]).lower(),
            data_bytes=int(raw.get("dataBytes") or 0),
            label=raw.get("label"),
            metadata=raw.get("metadata"),
            filename=raw.get("filename"),
            content_type=raw.get("contentType"),
            stored=bool(raw.get("stored")),
            created_at=None
            if created is None
            else datetime.fromisoformat(str(created).replace("Z", "+00:00")),
            batch_id=raw.get("batchId"),
            anchor=None if anchor is None else Anchor.parse(anchor),
            proof=None if proof is None else Proof.from_dict(proof),
            error=raw.get("error"),
            credits=None if raw.get("credits") is None else int(raw["credits"]),
        )


class Notarization:
    """A notarization the service accepted: its `id` and `document_hash`, and the way to its
    proof. `accepted` is the service's answer to the request, when this handle came from one."""

    def __init__(
        self,
        api: ServiceApi,
        notarization_id: str,
        document_hash: str,
        chain_id: int,
        accepted: NotarizationStatus | None = None,
    ) -> None:
        self._api = api
        self.id = notarization_id
        self.document_hash = document_hash
        self.chain_id = chain_id
        self.accepted = accepted

    def __repr__(self) -> str:
        return f"Notarization(id={self.id!r}, document_hash={self.document_hash})"

    @property
    def credits(self) -> int | None:
        """What the request that made this notarization cost (None if unknown here)."""
        return None if self.accepted is None else self.accepted.credits

    async def status(self) -> NotarizationStatus:
        """The service's view of this notarization now."""
        return NotarizationStatus.parse(await self._api.get(f"{_PATH}/{self.id}"))

    async def proof(self) -> Proof | None:
        """The proof if the notarization is anchored, else None (one request)."""
        try:
            raw = await self._api.get(f"{_PATH}/{self.id}/proof")
        except ApiError as exc:
            if exc.code == "notarization_not_anchored":
                if exc.problem.get("notarizationStatus") == "failed":
                    raise NotarizationFailedError(self.id, (await self.status()).error) from None
                return None
            raise
        return self._checked(Proof.from_dict(raw))

    async def wait_for_proof(
        self,
        timeout: float = 60.0,  # noqa: ASYNC109 - a deadline for polling, not for one await
        poll_interval: float = 0.5,
    ) -> Proof:
        """Wait until the notarization is anchored and return its proof. A batched one waits
        for its batch (up to the service's batch interval, 10 s by default) and the anchor
        transaction; a direct one about a second. Raises NotarizationFailedError if
        anchoring failed, NotarizationTimeoutError after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            proof = await self.proof()
            if proof is not None:
                return proof
            if time.monotonic() >= deadline:
                raise NotarizationTimeoutError(self.id, timeout, "pending")
            await asyncio.sleep(min(poll_interval, max(deadline - time.monotonic(), 0.0)))

    async def document(self) -> bytes:
        """The document, if it was uploaded with `store=True` (else NotFoundError,
        `document_not_stored`)."""
        return await self._api.get_bytes(f"{_PATH}/{self.id}/document")

    def _checked(self, proof: Proof) -> Proof:
        if proof.leaf != self.document_hash:
            raise EntrywayError(
                f"the service's proof for notarization {self.id} is of leaf {proof.leaf}, "
                f"not of its document hash {self.document_hash}"
            )
        return proof


class BulkNotarization(Sequence[Notarization]):
    """The notarizations of one bulk request, in the order of its items; `credits` is what
    the request cost."""

    def __init__(
        self, chain_id: int, mode: str, credits: int, notarizations: Sequence[Notarization]
    ) -> None:
        self.chain_id = chain_id
        self.mode = mode
        self.credits = credits
        self.notarizations = tuple(notarizations)

    @overload
    def __getitem__(self, index: int) -> Notarization: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Notarization]: ...
    def __getitem__(self, index: int | slice) -> Notarization | Sequence[Notarization]:
        return self.notarizations[index]

    def __len__(self) -> int:
        return len(self.notarizations)

    def __iter__(self) -> Iterator[Notarization]:
        return iter(self.notarizations)

    def __repr__(self) -> str:
        return f"BulkNotarization(count={len(self)}, mode={self.mode!r}, credits={self.credits})"

    async def wait_for_proofs(
        self,
        timeout: float = 60.0,  # noqa: ASYNC109 - a deadline for polling, not for one await
        poll_interval: float = 0.5,
    ) -> list[Proof]:
        """Every item's proof, in order (they wait concurrently)."""
        return list(await asyncio.gather(*(n.wait_for_proof(timeout, poll_interval) for n in self)))


class Notary:
    """The requests behind `Entryway.notarize_*` for one chain."""

    def __init__(self, api: ServiceApi, chain_id: int) -> None:
        self.api = api
        self.chain_id = chain_id

    def _handle(self, raw: Mapping[str, Any]) -> Notarization:
        accepted = NotarizationStatus.parse(raw)
        return Notarization(
            self.api, accepted.id, accepted.document_hash, accepted.chain_id, accepted
        )

    async def document(
        self,
        data: bytes,
        *,
        label: str | None,
        metadata: Mapping[str, Any] | None,
        mode: str,
        store: bool,
        filename: str | None,
        content_type: str,
        idempotency_key: str | None,
    ) -> Notarization:
        if not isinstance(data, bytes | bytearray | memoryview):
            raise TypeError(f"the document is bytes, not {type(data).__name__}")
        form = {
            "chainId": str(self.chain_id),
            "mode": check_mode(mode),
            "store": "true" if store else "false",
        }
        if label is not None:
            form["label"] = label
        if metadata is not None:
            form["metadata"] = json.dumps(dict(metadata))
        files = {"file": (filename or "document", bytes(data), content_type)}
        raw = await self.api.post(
            f"{_PATH}/document",
            data=form,
            files=files,
            idempotency_key=idempotency_key,
            idempotent=True,
        )
        return self._handle(raw)

    async def hash(
        self,
        value: HashLike,
        *,
        label: str | None,
        metadata: Mapping[str, Any] | None,
        mode: str,
        idempotency_key: str | None,
    ) -> Notarization:
        body = NotarizationItem(value, label, metadata).to_wire()
        body |= {"chainId": self.chain_id, "mode": check_mode(mode)}
        raw = await self.api.post(
            _PATH, json=body, idempotency_key=idempotency_key, idempotent=True
        )
        return self._handle(raw)

    async def hashes(
        self,
        items: Sequence[NotarizationItemLike],
        *,
        mode: str,
        idempotency_key: str | None,
    ) -> BulkNotarization:
        wire = [as_item(i).to_wire() for i in items]
        if not wire:
            raise ValueError("notarize_hashes needs at least one hash")
        body = {"chainId": self.chain_id, "mode": check_mode(mode), "items": wire}
        raw = await self.api.post(
            f"{_PATH}/bulk", json=body, idempotency_key=idempotency_key, idempotent=True
        )
        handles = [
            Notarization(self.api, str(r["id"]), str(r["documentHash"]).lower(), self.chain_id)
            for r in raw["notarizations"]
        ]
        return BulkNotarization(int(raw["chainId"]), str(raw["mode"]), int(raw["credits"]), handles)

    async def get(self, notarization_id: str) -> Notarization:
        status = NotarizationStatus.parse(await self.api.get(f"{_PATH}/{notarization_id}"))
        return Notarization(self.api, status.id, status.document_hash, status.chain_id, None)
