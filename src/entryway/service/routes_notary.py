"""Notarization: hashes and documents in (charged once per request), notarizations and their
proofs out. Every write names its chain, checked like every chain-bound route (403
chain_not_recognised, ...); intake does not wait for the network: hashes are accepted while
a node is away, and anchoring retries until it is back. docs/notary.md has the details."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Annotated

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
    RequestKeyReusedError,
    request_digest,
    request_quote,
)
from entryway.domain.proof import document_hash
from entryway.notary.service import Notary, NotaryUnavailableError
from entryway.service.auth import CurrentCaller
from entryway.service.chain_access import require_chain_access
from entryway.service.downloads import attachment
from entryway.service.limits import RequestLimits
from entryway.service.notary_fields import (
    DOCUMENT_FORM,
    chain_field,
    checked_metadata,
    flag_field,
    header_text,
    label_field,
    metadata_field,
    mode_field,
)
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

HASH_IN_THREAD_BYTES = 1024 * 1024  # hash bigger documents off the event loop
_KEY = re.compile(r"^[\x21-\x7e]{1,150}$")
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        description="Any printable ASCII, 1-150 characters, naming one request of the "
        "project: the same request again with it returns the first answer and is never "
        "charged twice; another request with it (another endpoint, other items) is 409 "
        "`idempotency_key_reused`. Without one, the request's content names it.",
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
        openapi_extra={"requestBody": DOCUMENT_FORM},
    )
    async def notarize_document(
        who: CurrentCaller, request: Request, key: IdempotencyKey = None
    ) -> NotarizationAccepted:
        """Upload a document (multipart): the service hashes it and keeps only the hash and
        metadata, unless `store` is true (credits: the fee + 10 per KiB of the document)."""
        notary = notarizations_of(request)
        upload = await read_upload(request, notary.settings.max_document_bytes)
        form = upload.fields
        chain_id = chain_field(form.get("chainId"))
        mode = mode_field(form.get("mode"))
        label = label_field(form.get("label"))
        metadata = metadata_field(form.get("metadata"), _json_depth(request))
        store = flag_field(form.get("store"))
        content = upload.content
        if len(content) >= HASH_IN_THREAD_BYTES:
            digest = await asyncio.to_thread(document_hash, content)
        else:
            digest = document_hash(content)
        item = NewNotarization(
            document_hash=digest,
            data_bytes=len(content),
            kind=NotarizationKind.DOCUMENT,
            label=label,
            metadata=metadata,
            filename=header_text(upload.filename, 255),
            content_type=header_text(upload.content_type, 200),
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
        """The document itself, if it was uploaded with `store` true (free), as a download:
        `application/octet-stream`, attachment under its uploaded file name (its media type
        is the notarization's `contentType`)."""
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
        return attachment(content, found.filename, f"notarization-{notarization_id}")

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
    if key is not None and not _KEY.fullmatch(key):
        raise Problem(
            422,
            "validation_error",
            "Invalid request",
            "Idempotency-Key: 1-150 printable ASCII characters",
        )
    # A key names one request of the project, whatever its endpoint: the first row of the
    # request holds it, with the digest of what was asked, to tell a retry from a reuse.
    digest = request_digest(endpoint, chain_id, mode, items)
    request_key = f"key:{key}" if key is not None else f"derived:{digest}"
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
            who.project_id, who.key_id, chain_id, mode, items, request_key, digest=digest
        )
    except NotaryUnavailableError as exc:
        raise Problem(503, "notary_unavailable", "Notary unavailable", str(exc)) from None
    except RequestKeyReusedError as exc:
        raise Problem(409, "idempotency_key_reused", "Idempotency key reused", str(exc)) from None
    except NotarizationError as exc:
        raise Problem(422, "validation_error", "Invalid request", str(exc)) from None
    return submitted, charged.credits


async def _mine(notary: Notary, who: Caller, notarization_id: str) -> Notarization:
    """The project's notarization, if it is on a chain of the key's (and still of the
    project's): a key sees nothing on the chains it has no access to, as `/v1/ops` looks for
    an op on the key's chains only."""
    found = (
        await notary.get(who.project_id, notarization_id) if len(notarization_id) <= 36 else None
    )
    if found is not None and found.chain_id not in who.chains:
        found = None
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
        label=body.label or None,
        metadata=checked_metadata(body.metadata),
    )


def _hex(value: bytes) -> str:
    return "0x" + value.hex()


def _json_depth(request: Request) -> int:
    """The nesting a JSON body may have here, for metadata sent in a form."""
    limits = getattr(request.app.state, "limits", None)
    return (limits if isinstance(limits, RequestLimits) else RequestLimits()).max_json_depth
