"""Notarization: hashes and documents in (charged once per request), notarizations and their
proofs out. Every write names its chain, checked like every chain-bound route (403
chain_not_recognised, ...); intake does not wait for the network: hashes are accepted while
a node is away, and anchoring retries until it is back. docs/notary.md has the details."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Header, Request
from fastapi.responses import Response

from entryway.domain.notarization import (
    HASH_BYTES,
    NewNotarization,
    Notarization,
    NotarizationError,
    NotarizationKind,
    NotarizationMode,
    NotarizationStatus,
    derived_request_key,
    request_quote,
)
from entryway.domain.proof import document_hash
from entryway.notary.service import Notary, NotaryUnavailableError
from entryway.service.auth import CurrentCaller
from entryway.service.chain_access import require_chain_access
from entryway.service.problems import Problem
from entryway.service.schemas_notary import (
    BulkAccepted,
    HashItemIn,
    NotarizationAccepted,
    NotarizationOut,
    NotarizationRef,
    NotarizeBulkIn,
    NotarizeHashIn,
)
from entryway.service.services import Services
from entryway.service.uploads import read_upload
from entryway.storage.notary import Submitted
from entryway.storage.store import Caller

MAX_METADATA_BYTES = 16 * 1024
HASH_IN_THREAD_BYTES = 1024 * 1024  # hash bigger documents off the event loop
_KEY = re.compile(r"^[\x21-\x7e]{1,150}$")
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        description="Any printable ASCII, 1-150 characters: a retry with the same key returns "
        "the first answer and is never charged twice. Without one, the key is derived from "
        "the request's content.",
    ),
]


def notarizations_of(request: Request) -> Notary:
    notary = request.app.state.services.notary
    if not isinstance(notary, Notary):
        raise Problem(
            503, "notary_unavailable", "Notary unavailable", "this service notarizes nothing"
        )
    return notary


def notary_routes() -> APIRouter:
    router = APIRouter(prefix="/v1/notarizations", tags=["notary"])

    @router.post("", operation_id="notarizeHash", status_code=202)
    async def notarize_hash(
        who: CurrentCaller, request: Request, body: NotarizeHashIn, key: IdempotencyKey = None
    ) -> NotarizationAccepted:
        """Notarize a document by its SHA-256 (credits: the notarization fee + the data fee
        for 32 bytes)."""
        item = _item(body)
        return await _accept_one(request, who, body.chain_id, body.mode, item, "hash", key)

    @router.post(
        "/document",
        operation_id="notarizeDocument",
        status_code=202,
        openapi_extra={"requestBody": _DOCUMENT_FORM},
    )
    async def notarize_document(
        who: CurrentCaller, request: Request, key: IdempotencyKey = None
    ) -> NotarizationAccepted:
        """Upload a document (multipart): the service hashes it and keeps only the hash and
        metadata, unless `store` is true (credits: the fee + 10 per KiB of the document)."""
        notary = notarizations_of(request)
        upload = await read_upload(request, notary.settings.max_document_bytes)
        form = upload.fields
        chain_id = _chain_field(form.get("chainId"))
        mode = _mode_field(form.get("mode"))
        content = upload.content
        if len(content) >= HASH_IN_THREAD_BYTES:
            digest = await asyncio.to_thread(document_hash, content)
        else:
            digest = document_hash(content)
        store = _flag_field(form.get("store"))
        item = NewNotarization(
            document_hash=digest,
            data_bytes=len(content),
            kind=NotarizationKind.DOCUMENT,
            label=_checked_label(form.get("label")),
            metadata=_metadata(form.get("metadata")),
            filename=_header_text(upload.filename, 255),
            content_type=_header_text(upload.content_type, 200),
            document=content if store else None,
        )
        return await _accept_one(request, who, chain_id, mode, item, "document", key)

    @router.post("/bulk", operation_id="notarizeBulk", status_code=202)
    async def notarize_bulk(
        who: CurrentCaller, request: Request, body: NotarizeBulkIn, key: IdempotencyKey = None
    ) -> BulkAccepted:
        """Notarize many hashes in one request (at most the service's bulk limit, 1,000 by
        default), charged as one usage event: the sum of each hash's price."""
        notary = notarizations_of(request)
        if len(body.items) > notary.settings.max_bulk:
            raise Problem(
                422,
                "validation_error",
                "Invalid request",
                f"items: at most {notary.settings.max_bulk} hashes per request",
            )
        items = [_item(i) for i in body.items]
        submitted, credits = await _accept(
            request, who, body.chain_id, body.mode, items, "bulk", key
        )
        if submitted.replayed:
            found = await notary.many(who.project_id, submitted.notarization_ids)
            refs = [
                NotarizationRef(
                    id=n.notarization_id, document_hash=_hex(n.document_hash), status=n.status
                )
                for n in found
            ]
        else:
            refs = [
                NotarizationRef(
                    id=i, document_hash=_hex(item.document_hash), status=NotarizationStatus.PENDING
                )
                for i, item in zip(submitted.notarization_ids, items, strict=True)
            ]
        return BulkAccepted(
            chain_id=body.chain_id,
            mode=body.mode,
            count=len(refs),
            credits=credits,
            notarizations=refs,
        )

    @router.get("/{notarization_id}", operation_id="getNotarization")
    async def get_notarization(
        who: CurrentCaller, request: Request, notarization_id: str
    ) -> NotarizationOut:
        """A notarization of this project: its status and, once anchored, its anchor and the
        proof document (free)."""
        notary = notarizations_of(request)
        found = await _mine(notary, who, notarization_id)
        _count(request, who, "notarizations.get", found.chain_id)
        return NotarizationOut.of(found, await notary.proof(found))

    @router.get("/{notarization_id}/proof", operation_id="getNotarizationProof")
    async def get_proof(who: CurrentCaller, request: Request, notarization_id: str) -> Response:
        """The `entryway-proof/1` document, as `entryway verify` reads it (free); 409 until
        the notarization is anchored."""
        notary = notarizations_of(request)
        found = await _mine(notary, who, notarization_id)
        proof = await notary.proof(found)
        if proof is None:
            raise Problem(
                409,
                "notarization_not_anchored",
                "Not anchored",
                f"notarization {notarization_id} is {found.status.value}; its proof exists once "
                "it is anchored",
                notarizationStatus=found.status.value,
            )
        _count(request, who, "notarizations.proof", found.chain_id)
        return Response(proof.to_json(), media_type="application/json")

    @router.get("/{notarization_id}/document", operation_id="getNotarizationDocument")
    async def get_document(who: CurrentCaller, request: Request, notarization_id: str) -> Response:
        """The document itself, if it was uploaded with `store` true (free)."""
        notary = notarizations_of(request)
        found = await _mine(notary, who, notarization_id)
        content = await notary.document(who.project_id, notarization_id) if found.stored else None
        if content is None:
            raise Problem(
                404,
                "document_not_stored",
                "Document not stored",
                f"notarization {notarization_id} kept only the document's hash",
            )
        _count(request, who, "notarizations.document", found.chain_id)
        return Response(content, media_type=found.content_type or "application/octet-stream")

    return router


async def _accept_one(
    request: Request,
    who: Caller,
    chain_id: int,
    mode: NotarizationMode,
    item: NewNotarization,
    endpoint: str,
    key: str | None,
) -> NotarizationAccepted:
    submitted, credits = await _accept(request, who, chain_id, mode, [item], endpoint, key)
    notary = notarizations_of(request)
    if submitted.written:
        found: Notarization | None = submitted.written[0]
    else:
        found = await notary.get(who.project_id, submitted.notarization_ids[0])
    assert found is not None
    out = NotarizationOut.of(found, await notary.proof(found))
    return NotarizationAccepted(**out.model_dump(), credits=credits)


async def _accept(
    request: Request,
    who: Caller,
    chain_id: int,
    mode: NotarizationMode,
    items: Sequence[NewNotarization],
    endpoint: str,
    key: str | None,
) -> tuple[Submitted, int]:
    """Check the chain, charge the request once per key, record it; (what was recorded,
    credits charged)."""
    notary = notarizations_of(request)
    require_chain_access(who, chain_id)
    if chain_id not in notary.chains:
        raise Problem(
            503,
            "notary_unavailable",
            "Notary unavailable",
            f"this service has no NotaryAnchor or notary key for chain {chain_id}",
        )
    if key is not None and not _KEY.match(key):
        raise Problem(
            422,
            "validation_error",
            "Invalid request",
            "Idempotency-Key: 1-150 printable ASCII characters",
        )
    # A key names one request of one endpoint and size: reused for another, it is another.
    request_key = (
        f"{endpoint}:{len(items)}:{key}"
        if key is not None
        else derived_request_key(chain_id, mode, items)
    )
    services: Services = request.app.state.services
    quote = request_quote(services.prices, items)
    charged = await services.platform.meter.charge(
        who,
        quote,
        f"notarization:{request_key}",
        endpoint=f"notarizations.{endpoint}",
        chain_id=chain_id,
    )
    try:
        submitted = await notary.submit(
            who.project_id, who.key_id, chain_id, mode, items, request_key
        )
    except NotaryUnavailableError as exc:
        raise Problem(503, "notary_unavailable", "Notary unavailable", str(exc)) from None
    except NotarizationError as exc:
        raise Problem(422, "idempotency_key_reused", "Idempotency key reused", str(exc)) from None
    return submitted, charged.credits


async def _mine(notary: Notary, who: Caller, notarization_id: str) -> Notarization:
    found = (
        await notary.get(who.project_id, notarization_id) if len(notarization_id) <= 36 else None
    )
    if found is None:
        raise Problem(
            404,
            "notarization_not_found",
            "Notarization not found",
            f"no notarization {notarization_id} in this project",
        )
    return found


def _count(request: Request, who: Caller, endpoint: str, chain_id: int) -> None:
    services: Services = request.app.state.services
    services.platform.meter.count_read(who, endpoint, chain_id)


def _item(body: HashItemIn) -> NewNotarization:
    return NewNotarization(
        document_hash=bytes.fromhex(body.document_hash[2:]),
        data_bytes=HASH_BYTES,
        label=_checked_label(body.label),
        metadata=_checked_metadata(body.metadata),
    )


def _hex(value: bytes) -> str:
    return "0x" + value.hex()


def _invalid(detail: str) -> Problem:
    return Problem(422, "validation_error", "Invalid request", detail)


def _checked_metadata(metadata: dict[str, Any] | None) -> dict[str, Any] | None:
    if metadata is None:
        return None
    try:
        size = len(orjson.dumps(metadata))
    except orjson.JSONEncodeError as exc:  # e.g. an integer beyond 64 bits
        raise _invalid(f"metadata: {exc}") from None
    if size > MAX_METADATA_BYTES:
        raise _invalid(f"metadata: at most {MAX_METADATA_BYTES} bytes as JSON")
    return metadata


def _checked_label(text: str | None) -> str | None:
    if text is not None and (len(text) > 200 or "\x00" in text):
        raise _invalid("label: at most 200 characters, no NUL")
    return text or None


def _header_text(text: str | None, limit: int) -> str | None:
    """A filename or media type from the upload, as much as the columns hold."""
    if not text:
        return None
    return text.replace("\x00", "")[:limit] or None


def _metadata(text: str | None) -> dict[str, Any] | None:
    if text is None or text == "":
        return None
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise _invalid("metadata: not JSON") from None
    if not isinstance(value, dict):
        raise _invalid("metadata: a JSON object")
    return _checked_metadata(value)


def _chain_field(text: str | None) -> int:
    if text is None or not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 2**53:
        raise _invalid("chainId: a chain id (a positive integer) is required")
    return int(text)


def _mode_field(text: str | None) -> NotarizationMode:
    try:
        return NotarizationMode(text or NotarizationMode.BATCHED.value)
    except ValueError:
        raise _invalid("mode: 'batched' or 'direct'") from None


def _flag_field(text: str | None) -> bool:
    if text is None or text.lower() in ("", "false", "0"):
        return False
    if text.lower() in ("true", "1"):
        return True
    raise _invalid("store: true or false")


_DOCUMENT_FORM: dict[str, Any] = {
    "required": True,
    "content": {
        "multipart/form-data": {
            "schema": {
                "type": "object",
                "required": ["file", "chainId"],
                "properties": {
                    "file": {"type": "string", "format": "binary"},
                    "chainId": {"type": "integer"},
                    "mode": {"type": "string", "enum": ["batched", "direct"]},
                    "label": {"type": "string", "maxLength": 200},
                    "metadata": {"type": "string", "description": "a JSON object"},
                    "store": {
                        "type": "boolean",
                        "description": "keep the document (default false)",
                    },
                },
            }
        }
    },
}
