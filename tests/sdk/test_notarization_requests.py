"""Notarization requests as the SDK sends them (JSON, multipart, bulk, Idempotency-Key),
waiting for a proof (409 until anchored, failed, timeout) and the handles it returns, over a
fake service."""

from __future__ import annotations

import email.parser
import json
from typing import Any

import httpx
import pytest
from entryway_sdk import (
    EntrywayError,
    NotarizationFailedError,
    NotarizationItem,
    NotarizationTimeoutError,
    NotFoundError,
    Proof,
    document_hash,
)

from tests.sdk.fakes import Fake, init, problem
from tests.sdk.test_proofs import service_proofs

DOCUMENT = b"the contract, signed"
HASH = document_hash(DOCUMENT)
ID = "0b7c4f52-4f0e-4cd4-9c0c-5c1b0c1d2e3f"


def accepted(doc_hash: str = HASH, **extra: Any) -> dict[str, Any]:
    return {
        "id": ID,
        "chainId": 80002,
        "mode": "batched",
        "kind": "hash",
        "status": "pending",
        "documentHash": doc_hash,
        "dataBytes": 32,
        "label": None,
        "metadata": None,
        "filename": None,
        "contentType": None,
        "stored": False,
        "createdAt": "2026-11-21T12:00:00Z",
        "batchId": None,
        "anchor": None,
        "proof": None,
        "error": None,
        "credits": 510,
    } | extra


def answer(status: int, body: Any) -> Any:
    return lambda _: httpx.Response(status, json=body)


def not_anchored(status: str = "pending") -> httpx.Response:
    return problem(409, "notarization_not_anchored", notarizationStatus=status)


async def test_a_hash_is_sent_as_json_with_the_clients_chain(
    http: httpx.AsyncClient, fake: Fake
) -> None:
    sent: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(202, json=accepted())

    fake.routes["/v1/notarizations"] = record
    client = await init(http)
    n = await client.notarize_hash(
        HASH[2:].upper(), label="contract 7", metadata={"client": "ACME"}, mode="direct"
    )
    assert (n.id, n.document_hash, n.chain_id, n.credits) == (ID, HASH, 80002, 510)
    assert n.accepted is not None and n.accepted.status == "pending"
    assert json.loads(sent[0].content) == {
        "documentHash": HASH,
        "label": "contract 7",
        "metadata": {"client": "ACME"},
        "chainId": 80002,
        "mode": "direct",
    }
    assert "idempotency-key" not in sent[0].headers
    await client.notarize_hash(bytes.fromhex(HASH[2:]), idempotency_key="order-7")
    assert json.loads(sent[1].content) == {
        "documentHash": HASH,
        "chainId": 80002,
        "mode": "batched",
    }
    assert sent[1].headers["idempotency-key"] == "order-7"


async def test_a_document_or_a_bad_mode_is_refused_before_sending(
    http: httpx.AsyncClient, fake: Fake
) -> None:
    client = await init(http)
    with pytest.raises(ValueError, match="notarize_document"):
        await client.notarize_hash(DOCUMENT)
    with pytest.raises(ValueError, match="64 hex digits"):
        await client.notarize_hash("0x1234")
    with pytest.raises(ValueError, match="'batched' or 'direct'"):
        await client.notarize_hash(HASH, mode="fast")  # type: ignore[arg-type]
    assert "/v1/notarizations" not in fake.seen


async def test_a_document_is_uploaded_as_multipart(http: httpx.AsyncClient, fake: Fake) -> None:
    sent: list[httpx.Request] = []

    def record(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(202, json=accepted(kind="document", stored=True, credits=500))

    fake.routes["/v1/notarizations/document"] = record
    client = await init(http)
    n = await client.notarize_document(
        DOCUMENT, label="contract 7", metadata={"n": 1}, mode="direct", store=True,
        filename="contract.pdf", content_type="application/pdf",
    )  # fmt: skip
    assert n.document_hash == HASH and n.credits == 500
    head = f"Content-Type: {sent[0].headers['content-type']}\r\n\r\n".encode()
    message = email.parser.BytesParser().parsebytes(head + sent[0].content)
    parts = {p.get_param("name", header="content-disposition"): p for p in message.get_payload()}
    fields = {k: p.get_payload(decode=True).decode() for k, p in parts.items() if k != "file"}
    assert fields == {
        "chainId": "80002",
        "mode": "direct",
        "store": "true",
        "label": "contract 7",
        "metadata": '{"n": 1}',
    }
    assert parts["file"].get_payload(decode=True) == DOCUMENT
    assert parts["file"].get_filename() == "contract.pdf"
    assert parts["file"].get_content_type() == "application/pdf"


async def test_bulk_returns_a_handle_per_item_in_order(http: httpx.AsyncClient, fake: Fake) -> None:
    hashes = [document_hash(f"d{i}".encode()) for i in range(3)]
    sent: list[Any] = []

    def record(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        refs = [
            {"id": f"n{i}", "documentHash": h, "status": "pending"} for i, h in enumerate(hashes)
        ]
        body = {"chainId": 80002, "mode": "direct", "count": 3, "credits": 1530}
        return httpx.Response(202, json=body | {"notarizations": refs})

    fake.routes["/v1/notarizations/bulk"] = record
    client = await init(http)
    bulk = await client.notarize_hashes(
        [hashes[0], NotarizationItem(hashes[1], label="b"), {"document_hash": hashes[2]}],
        mode="direct",
    )
    assert [n.id for n in bulk] == ["n0", "n1", "n2"] and len(bulk) == 3
    assert [n.document_hash for n in bulk] == hashes and bulk.credits == 1530
    assert sent[0]["items"] == [
        {"documentHash": hashes[0]},
        {"documentHash": hashes[1], "label": "b"},
        {"documentHash": hashes[2]},
    ]
    with pytest.raises(ValueError, match="at least one"):
        await client.notarize_hashes([])


async def test_a_write_is_retried_after_a_gateway_error(
    http: httpx.AsyncClient, fake: Fake
) -> None:
    answers = [httpx.Response(502), httpx.Response(202, json=accepted())]
    fake.routes["/v1/notarizations"] = lambda _: answers.pop(0)
    client = await init(http)
    assert (await client.notarize_hash(HASH)).id == ID  # the service dedupes by content
    assert fake.seen.count("/v1/notarizations") == 2


async def test_wait_for_proof_polls_until_anchored(http: httpx.AsyncClient, fake: Fake) -> None:
    proof = service_proofs([DOCUMENT, b"other"])[0]
    answers = [not_anchored(), not_anchored(), httpx.Response(200, json=proof)]
    fake.routes[f"/v1/notarizations/{ID}/proof"] = lambda _: answers.pop(0)
    fake.routes["/v1/notarizations"] = answer(202, accepted())
    client = await init(http)
    n = await client.notarize_hash(HASH)
    got = await n.wait_for_proof(timeout=5, poll_interval=0.01)
    assert isinstance(got, Proof) and got.to_dict() == proof and got.leaf == HASH
    assert fake.seen.count(f"/v1/notarizations/{ID}/proof") == 3
    assert (await client.verify_proof(got, DOCUMENT, on_chain=False)).valid


async def test_wait_for_proof_raises_when_anchoring_failed(
    http: httpx.AsyncClient, fake: Fake
) -> None:
    fake.routes[f"/v1/notarizations/{ID}/proof"] = lambda _: not_anchored("failed")
    fake.routes[f"/v1/notarizations/{ID}"] = answer(
        200, accepted(status="failed", error="out of gas", credits=None)
    )
    client = await init(http)
    n = await client.notarization(ID)
    assert n.document_hash == HASH and n.credits is None
    with pytest.raises(NotarizationFailedError, match="out of gas") as caught:
        await n.wait_for_proof(timeout=5, poll_interval=0.01)
    assert caught.value.error == "out of gas"


async def test_wait_for_proof_times_out(http: httpx.AsyncClient, fake: Fake) -> None:
    fake.routes[f"/v1/notarizations/{ID}/proof"] = lambda _: not_anchored()
    fake.routes[f"/v1/notarizations/{ID}"] = answer(200, accepted())
    client = await init(http)
    n = await client.notarization(ID)
    with pytest.raises(NotarizationTimeoutError, match="no proof for notarization") as caught:
        await n.wait_for_proof(timeout=0.05, poll_interval=0.01)
    assert isinstance(caught.value, TimeoutError) and caught.value.status == "pending"


async def test_a_proof_of_another_document_is_refused(http: httpx.AsyncClient, fake: Fake) -> None:
    other = service_proofs([b"someone else's document"])[0]
    fake.routes[f"/v1/notarizations/{ID}/proof"] = answer(200, other)
    fake.routes[f"/v1/notarizations/{ID}"] = answer(200, accepted())
    client = await init(http)
    with pytest.raises(EntrywayError, match="not of its document hash"):
        await (await client.notarization(ID)).wait_for_proof(timeout=1)


async def test_stored_documents_come_back_as_bytes(http: httpx.AsyncClient, fake: Fake) -> None:
    fake.routes[f"/v1/notarizations/{ID}"] = answer(200, accepted(stored=True))
    fake.routes[f"/v1/notarizations/{ID}/document"] = lambda _: httpx.Response(
        200, content=DOCUMENT, headers={"content-type": "application/pdf"}
    )
    client = await init(http)
    n = await client.notarization(ID)
    assert await n.document() == DOCUMENT
    fake.routes[f"/v1/notarizations/{ID}/document"] = lambda _: problem(404, "document_not_stored")
    with pytest.raises(NotFoundError):
        await n.document()
