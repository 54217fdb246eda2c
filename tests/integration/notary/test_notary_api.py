"""Notarization through the API on anvil: documents and hashes in, a batch anchored by the
worker, proofs that verify offline and on chain, a tampered document refused; direct mode,
the size limit, another project's notarizations, chain access, credits charged once."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from sqlalchemy import select

from entryway.chain.rpc import EthClient
from entryway.domain.apikeys import KeyEnvironment
from entryway.domain.proof import InclusionProof, document_hash, verify_offline
from entryway.notary.verify import verify_proof
from entryway.storage.schema import webhook_events
from tests.integration.conftest import CHAIN_ID
from tests.integration.notary.conftest import NotaryRig

pytestmark = pytest.mark.anvil


def _hash() -> str:
    return "0x" + os.urandom(32).hex()


async def _upload(
    rig: NotaryRig, content: bytes, *, idempotency_key: str | None = None, **fields: str
) -> tuple[int, dict[str, Any]]:
    headers = rig.auth()
    if idempotency_key is not None:
        headers["Idempotency-Key"] = idempotency_key
    form = {"chainId": str(CHAIN_ID), **fields}
    answer = await rig.client.post(
        "/v1/notarizations/document",
        headers=headers,
        data=form,
        files={"file": ("contract.txt", content, "text/plain")},
    )
    return answer.status_code, answer.json()


async def test_documents_are_anchored_in_a_batch_and_their_proofs_verify(
    rig: NotaryRig, eth: EthClient
) -> None:
    await rig.webhooks.create_endpoint(
        rig.project_id, "https://hooks.example.org/in", ["notarization.anchored"]
    )
    documents = [os.urandom(24) + f" contract {i}\n".encode() for i in range(3)]
    ids = []
    for i, doc in enumerate(documents):
        status, body = await _upload(
            rig, doc, label=f"contract {i}", metadata=f'{{"n": {i}}}', store=str(i == 0).lower()
        )
        assert status == 202, body
        assert body["status"] == "pending" and body["kind"] == "document"
        assert body["documentHash"] == "0x" + document_hash(doc).hex()
        assert body["dataBytes"] == len(doc) and body["metadata"] == {"n": i}
        assert body["stored"] is (i == 0) and body["proof"] is None
        ids.append(str(body["id"]))
    by_hash = await rig.client.post(
        "/v1/notarizations", headers=rig.auth(), json={"chainId": CHAIN_ID, "documentHash": _hash()}
    )
    assert by_hash.status_code == 202, by_hash.text
    ids.append(by_hash.json()["id"])

    assert await rig.anchor_pending() == 1  # four hashes: a full batch, one anchoring task

    proofs = []
    for notarization_id, doc in zip(ids, documents, strict=False):
        got = (
            await rig.client.get(f"/v1/notarizations/{notarization_id}", headers=rig.auth())
        ).json()
        assert got["status"] == "anchored" and got["anchor"]["leafCount"] == 4
        proof = InclusionProof.from_dict(got["proof"])
        proofs.append(proof)
        assert verify_offline(proof, doc).valid
        on_chain = await verify_proof(proof, document_bytes=doc, eth=eth)
        assert on_chain.valid, on_chain.reason
        tampered = verify_offline(proof, doc + b" (amended)")
        assert not tampered.valid and tampered.reason.startswith("document does not match")
        raw = await rig.client.get(f"/v1/notarizations/{notarization_id}/proof", headers=rig.auth())
        assert InclusionProof.from_json(raw.content) == proof
    assert len({p.root for p in proofs}) == 1 and len({p.path for p in proofs}) == 3

    kept = await rig.client.get(f"/v1/notarizations/{ids[0]}/document", headers=rig.auth())
    assert kept.status_code == 200 and kept.content == documents[0]
    not_kept = await rig.client.get(f"/v1/notarizations/{ids[1]}/document", headers=rig.auth())
    assert not_kept.status_code == 404 and not_kept.json()["code"] == "document_not_stored"

    async with rig.services.store.engine.connect() as db:
        bodies = (
            await db.execute(
                select(webhook_events.c.body).where(webhook_events.c.project_id == rig.project_id)
            )
        ).scalars()
        events = [orjson.loads(b) for b in bodies]
    assert [e["type"] for e in events] == ["notarization.anchored"]
    data = events[0]["data"]
    assert {n["id"] for n in data["notarizations"]} == set(ids)
    assert data["root"] == "0x" + proofs[0].root.hex() and data["leafCount"] == 4


async def test_direct_mode_anchors_at_once_in_a_tree_of_one(rig: NotaryRig, eth: EthClient) -> None:
    batched = await rig.client.post(
        "/v1/notarizations", headers=rig.auth(), json={"chainId": CHAIN_ID, "documentHash": _hash()}
    )
    doc = os.urandom(40)
    status, direct = await _upload(rig, doc, mode="direct")
    assert status == 202 and direct["mode"] == "direct" and direct["batchId"] is not None

    assert await rig.worker.drain() == 1  # no batcher: only the direct request's task exists

    got = (await rig.client.get(f"/v1/notarizations/{direct['id']}", headers=rig.auth())).json()
    assert got["status"] == "anchored"
    proof = InclusionProof.from_dict(got["proof"])
    assert proof.leaf_count == 1 and proof.path == ()
    assert (await verify_proof(proof, document_bytes=doc, eth=eth)).valid
    waiting = await rig.client.get(f"/v1/notarizations/{batched.json()['id']}", headers=rig.auth())
    assert waiting.json()["status"] == "pending"
    early = await rig.client.get(
        f"/v1/notarizations/{batched.json()['id']}/proof", headers=rig.auth()
    )
    assert early.status_code == 409 and early.json()["code"] == "notarization_not_anchored"


async def test_documents_over_the_size_limit_are_refused_and_not_charged(rig: NotaryRig) -> None:
    limit = rig.notary.settings.max_document_bytes
    status, body = await _upload(rig, os.urandom(limit + 1))
    assert status == 413 and body["code"] == "payload_too_large"
    status, body = await _upload(rig, os.urandom(limit + 200_000))  # refused by its length
    assert status == 413 and body["code"] == "payload_too_large"
    assert await rig.charges() == (0, 0)
    status, body = await _upload(rig, os.urandom(limit))
    assert status == 202 and body["dataBytes"] == limit


async def test_another_projects_notarizations_are_not_found(rig: NotaryRig) -> None:
    mine = await rig.client.post(
        "/v1/notarizations", headers=rig.auth(), json={"chainId": CHAIN_ID, "documentHash": _hash()}
    )
    _, other_key = await rig.new_project()
    for suffix in ("", "/proof", "/document"):
        answer = await rig.client.get(
            f"/v1/notarizations/{mine.json()['id']}{suffix}", headers=rig.auth(other_key)
        )
        assert answer.status_code == 404 and answer.json()["code"] == "notarization_not_found"
    unknown = await rig.client.get("/v1/notarizations/no-such-id", headers=rig.auth())
    assert unknown.status_code == 404
    # A key of the same project whose chains do not include the notarization's sees nothing.
    store, now = rig.services.store, datetime.now(UTC)
    elsewhere = await store.issue_key(rig.project_id, KeyEnvironment.TEST, [84532], now)
    for suffix in ("", "/proof", "/document"):
        answer = await rig.client.get(
            f"/v1/notarizations/{mine.json()['id']}{suffix}", headers=rig.auth(elsewhere.secret)
        )
        assert answer.status_code == 404 and answer.json()["code"] == "notarization_not_found"
    assert (
        await rig.client.get(f"/v1/notarizations/{mine.json()['id']}", headers=rig.auth())
    ).status_code == 200


async def test_chain_access_is_checked_like_every_chain_route(rig: NotaryRig) -> None:
    _, only_amoy = await rig.new_project(chains=(CHAIN_ID,))
    refused = await rig.client.post(
        "/v1/notarizations",
        headers=rig.auth(only_amoy),
        json={"chainId": 84532, "documentHash": _hash()},
    )
    assert refused.status_code == 403 and refused.json()["code"] == "chain_not_recognised"
    # Enabled for the project, but this service anchors nothing there.
    elsewhere = await rig.client.post(
        "/v1/notarizations", headers=rig.auth(), json={"chainId": 84532, "documentHash": _hash()}
    )
    assert elsewhere.status_code == 503 and elsewhere.json()["code"] == "notary_unavailable"
    missing = await rig.client.post(
        "/v1/notarizations", headers=rig.auth(), json={"documentHash": _hash()}
    )
    assert missing.status_code == 422
    bad = await rig.client.post(
        "/v1/notarizations", headers=rig.auth(), json={"chainId": CHAIN_ID, "documentHash": "0x12"}
    )
    assert bad.status_code == 422 and bad.json()["code"] == "validation_error"
    assert await rig.charges() == (0, 0)


async def test_each_request_is_charged_exactly_once(rig: NotaryRig) -> None:
    prices = rig.services.prices
    per_hash = prices.notarization_quote(data_bytes=32, verification_steps=1).credits
    store = rig.services.store
    before = (await store.credit_account(rig.project_id)).balance(_now())
    body = {"chainId": CHAIN_ID, "documentHash": _hash(), "label": "invoice 7"}

    keyed = [
        await rig.client.post(
            "/v1/notarizations", headers={**rig.auth(), "Idempotency-Key": "k-1"}, json=body
        )
        for _ in range(2)
    ]
    assert [a.status_code for a in keyed] == [202, 202]
    assert keyed[0].json()["id"] == keyed[1].json()["id"]
    assert keyed[0].json()["credits"] == keyed[1].json()["credits"] == per_hash
    assert await rig.charges() == (1, per_hash)

    # No key: the same content is the same request (a retry), charged once.
    unkeyed = [
        (await rig.client.post("/v1/notarizations", headers=rig.auth(), json=body)).json()["id"]
        for _ in range(2)
    ]
    assert unkeyed[0] == unkeyed[1] != keyed[0].json()["id"]
    assert await rig.charges() == (2, 2 * per_hash)

    bulk: dict[str, Any] = {
        "chainId": CHAIN_ID,
        "items": [{"documentHash": _hash()} for _ in range(3)],
    }
    answers = [
        await rig.client.post(
            "/v1/notarizations/bulk", headers={**rig.auth(), "Idempotency-Key": "b-1"}, json=bulk
        )
        for _ in range(2)
    ]
    assert [a.status_code for a in answers] == [202, 202]
    first, again = answers[0].json(), answers[1].json()
    # Each of 3 hashes: 1 step + 2 levels of the request's tree (docs/notary.md).
    per_bulk_hash = prices.notarization_quote(data_bytes=32, verification_steps=3).credits
    assert per_bulk_hash == 530
    assert first["count"] == 3 and first["credits"] == 3 * per_bulk_hash
    assert [n["id"] for n in first["notarizations"]] == [n["id"] for n in again["notarizations"]]
    assert [n["documentHash"] for n in first["notarizations"]] == [
        i["documentHash"] for i in bulk["items"]
    ]
    assert await rig.charges() == (3, 2 * per_hash + 3 * per_bulk_hash)

    doc = os.urandom(2500)
    # The service hashed the upload: a second step (docs/notary.md).
    doc_price = prices.notarization_quote(data_bytes=2500, verification_steps=2).credits
    assert doc_price == 500 + 10 * 3 * 2
    for _ in range(2):
        status, answer = await _upload(rig, doc, idempotency_key="d-1")
        assert status == 202 and answer["credits"] == doc_price
    assert await rig.charges() == (4, 2 * per_hash + 3 * per_bulk_hash + doc_price)

    after = (await store.credit_account(rig.project_id)).balance(_now())
    assert before - after == 2 * per_hash + 3 * per_bulk_hash + doc_price


async def test_invalid_requests_are_refused_and_not_charged(rig: NotaryRig) -> None:
    limit = rig.notary.settings.max_bulk
    too_many = {"chainId": CHAIN_ID, "items": [{"documentHash": _hash()} for _ in range(limit + 1)]}
    answer = await rig.client.post("/v1/notarizations/bulk", headers=rig.auth(), json=too_many)
    assert answer.status_code == 422 and answer.json()["code"] == "validation_error"
    empty = await rig.client.post(
        "/v1/notarizations/bulk", headers=rig.auth(), json={"chainId": CHAIN_ID, "items": []}
    )
    assert empty.status_code == 422
    for extra in ({"label": "a\x00b"}, {"label": "x" * 201}, {"metadata": {"n": 2**70}}):
        body = {"chainId": CHAIN_ID, "documentHash": _hash(), **extra}
        answer = await rig.client.post("/v1/notarizations", headers=rig.auth(), json=body)
        assert answer.status_code == 422 and answer.json()["code"] == "validation_error"
    for form in (
        {"chainId": "x"},
        {"chainId": "²"},
        {"mode": "sometime"},
        {"metadata": "[1]"},
        {"store": "maybe"},
    ):
        status, problem = await _upload(rig, b"doc", **form)
        assert status == 422 and problem["code"] == "validation_error", form
    not_multipart = await rig.client.post(
        "/v1/notarizations/document", headers=rig.auth(), json={"chainId": CHAIN_ID}
    )
    assert not_multipart.status_code == 422
    keyed = await rig.client.post(
        "/v1/notarizations",
        headers={**rig.auth(), "Idempotency-Key": "has spaces"},
        json={"chainId": CHAIN_ID, "documentHash": _hash()},
    )
    assert keyed.status_code == 422
    assert await rig.charges() == (0, 0)


def _now() -> datetime:
    return datetime.now(UTC)
