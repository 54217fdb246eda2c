"""What a notarization request may carry, whichever way it comes (JSON or a multipart upload),
and what an Idempotency-Key names: one request of the project, never a second one."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import httpx
import pytest

from tests.integration.conftest import CHAIN_ID
from tests.integration.notary.conftest import NotaryRig

pytestmark = pytest.mark.anvil


def _hash() -> str:
    return "0x" + os.urandom(32).hex()


async def _json(
    rig: NotaryRig, body: dict[str, Any], *, key: str | None = None, bulk: bool = False
) -> httpx.Response:
    headers = rig.auth() if key is None else {**rig.auth(), "Idempotency-Key": key}
    path = "/v1/notarizations/bulk" if bulk else "/v1/notarizations"
    return await rig.client.post(path, headers=headers, json={"chainId": CHAIN_ID, **body})


async def _form(
    rig: NotaryRig, fields: dict[str, str], *, key: str | None = None, content: bytes = b"doc"
) -> httpx.Response:
    headers = rig.auth() if key is None else {**rig.auth(), "Idempotency-Key": key}
    return await rig.client.post(
        "/v1/notarizations/document",
        headers=headers,
        data={"chainId": str(CHAIN_ID), **fields},
        files={"file": ("contract.txt", content, "text/plain")},
    )


def _refused(answer: httpx.Response, status: int, code: str) -> str:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    problem = answer.json()
    assert problem["code"] == code, problem
    return str(problem["detail"])


BAD_LABELS = [
    "escape \x1b[31m red",  # a terminal escape
    "invoice \u202egpj.exe",  # a right-to-left override
    "isolate \u2066hidden\u2069",  # a bidi isolate
    "c1 control \x85",
    "two\nlines",
    "x" * 201,
]


@pytest.mark.parametrize("label", BAD_LABELS)
async def test_a_label_is_refused_alike_in_a_form_and_in_json(rig: NotaryRig, label: str) -> None:
    in_json = await _json(rig, {"documentHash": _hash(), "label": label})
    _refused(in_json, 422, "validation_error")
    detail = _refused(await _form(rig, {"label": label}), 422, "validation_error")
    assert detail.startswith("label: ")
    assert label not in detail  # the message does not carry what it refuses
    assert await rig.charges() == (0, 0)


BAD_METADATA = [
    ('{"n": 18446744073709551616}', "64-bit"),  # past 64 bits: it would come back a float
    ('{"": 1}', "metadata: a key"),
    ('{"tab\\tkey": 1}', "metadata: a key"),
    ('{"bidi\\u202ekey": 1}', "metadata: a key"),
    ('{"' + "k" * 101 + '": 1}', "metadata: a key"),
    ('{"s": "\\ud800"}', "metadata: "),  # a lone surrogate
    ('{"n": NaN}', "metadata: "),
    ('{"n": 1e400}', "metadata: "),
    ('{"deep": ' + "[" * 80 + "]" * 80 + "}", "nest at most 64"),
    ('{"a": 1} trailing', "metadata: "),
    ("[1]", "metadata: a JSON object"),
]


@pytest.mark.parametrize(("text", "fragment"), BAD_METADATA)
async def test_metadata_in_a_form_is_read_as_strictly_as_a_json_body(
    rig: NotaryRig, text: str, fragment: str
) -> None:
    detail = _refused(await _form(rig, {"metadata": text}), 422, "validation_error")
    assert fragment in detail
    # The same object in a JSON body is refused too (the body's own rules answer 400).
    body = f'{{"chainId": {CHAIN_ID}, "documentHash": "{_hash()}", "metadata": {text}}}'
    answer = await rig.client.post(
        "/v1/notarizations",
        headers={**rig.auth(), "Content-Type": "application/json"},
        content=body.encode(),
    )
    assert answer.status_code in (400, 422), answer.text
    assert await rig.charges() == (0, 0)


async def test_what_json_accepts_a_form_accepts_and_keeps_the_same(rig: NotaryRig) -> None:
    label = "Contrat n° 7 — signé ✓ (version 2)"
    metadata = {"n": 2**63 - 1, "min": -(2**63), "x": 0.5, "nested": {"k": [None, True]}}
    form = await _form(rig, {"label": label, "metadata": json.dumps(metadata)})
    assert form.status_code == 202, form.text
    hashed = await _json(rig, {"documentHash": _hash(), "label": label, "metadata": metadata})
    assert hashed.status_code == 202, hashed.text
    for answer in (form.json(), hashed.json()):
        assert (answer["label"], answer["metadata"]) == (label, metadata)
        stored = await rig.client.get(f"/v1/notarizations/{answer['id']}", headers=rig.auth())
        assert (stored.json()["label"], stored.json()["metadata"]) == (label, metadata)
    for none in ({"label": "", "metadata": ""}, {"metadata": "null"}):
        bare = await _form(rig, none, content=os.urandom(40))
        assert bare.status_code == 202, bare.text
        assert (bare.json()["label"], bare.json()["metadata"]) == (None, None)


async def test_an_idempotency_key_names_one_request_of_the_project(rig: NotaryRig) -> None:
    item = {"documentHash": _hash(), "label": "invoice 7"}
    first = await _json(rig, item, key="order-7")
    assert first.status_code == 202, first.text
    again = await _json(rig, item, key="order-7")
    assert again.status_code == 202 and again.json()["id"] == first.json()["id"]
    charged = await rig.charges()
    assert charged[0] == 1

    others: list[tuple[str, Any]] = [
        ("another hash", _json(rig, {**item, "documentHash": _hash()}, key="order-7")),
        ("another label", _json(rig, {**item, "label": "invoice 8"}, key="order-7")),
        ("another mode", _json(rig, {**item, "mode": "direct"}, key="order-7")),
        ("the bulk endpoint", _json(rig, {"items": [item]}, key="order-7", bulk=True)),
        ("a document", _form(rig, {"label": "invoice 7"}, key="order-7")),
    ]
    for what, request in others:
        detail = _refused(await request, 409, "idempotency_key_reused")
        assert "different request" in detail, what
    assert await rig.charges() == charged  # none of them was charged

    # A bulk request: the same items in the same order are the same request, nothing else.
    items = [{"documentHash": _hash()} for _ in range(3)]
    bulk = await _json(rig, {"items": items}, key="batch-1", bulk=True)
    assert bulk.status_code == 202, bulk.text
    ids = [n["id"] for n in bulk.json()["notarizations"]]
    retry = await _json(rig, {"items": items}, key="batch-1", bulk=True)
    assert [n["id"] for n in retry.json()["notarizations"]] == ids
    for changed in (items[:2], [*items, {"documentHash": _hash()}], items[::-1]):
        answer = await _json(rig, {"items": changed}, key="batch-1", bulk=True)
        _refused(answer, 409, "idempotency_key_reused")
    _refused(await _json(rig, items[0], key="batch-1"), 409, "idempotency_key_reused")
    assert (await rig.charges())[0] == 2

    # A document: the same file and fields again is a retry; another file is not.
    doc = os.urandom(300)
    uploaded = await _form(rig, {"store": "true"}, key="scan-1", content=doc)
    assert uploaded.status_code == 202, uploaded.text
    retried = await _form(rig, {"store": "true"}, key="scan-1", content=doc)
    assert retried.json()["id"] == uploaded.json()["id"]
    for fields, content in (({"store": "true"}, os.urandom(300)), ({}, doc)):
        answer = await _form(rig, fields, key="scan-1", content=content)
        _refused(answer, 409, "idempotency_key_reused")
    assert (await rig.charges())[0] == 3

    # Keys belong to a project: another project's "order-7" is its own request.
    pid, key = await rig.new_project()
    theirs = await rig.client.post(
        "/v1/notarizations",
        headers={"Authorization": f"Bearer {key}", "Idempotency-Key": "order-7"},
        json={"chainId": CHAIN_ID, "documentHash": _hash()},
    )
    assert theirs.status_code == 202, theirs.text
    assert theirs.json()["id"] != first.json()["id"]
    assert (await rig.charges(pid))[0] == 1


async def test_two_requests_racing_on_one_key_make_one_notarization(rig: NotaryRig) -> None:
    answers = await asyncio.gather(
        *(_json(rig, {"documentHash": _hash()}, key="race") for _ in range(2))
    )
    assert sorted(a.status_code for a in answers) == [202, 409]
    assert (await rig.charges())[0] == 1


async def test_without_a_key_the_request_itself_is_the_key(rig: NotaryRig) -> None:
    item = {"documentHash": _hash()}
    single = [(await _json(rig, item)).json()["id"] for _ in range(2)]
    assert single[0] == single[1]  # a retry
    bulk = (await _json(rig, {"items": [item]}, bulk=True)).json()
    assert bulk["notarizations"][0]["id"] != single[0]  # another endpoint: another request
    assert (await rig.charges())[0] == 2
