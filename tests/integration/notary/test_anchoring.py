"""The anchoring task on anvil: a worker that dies between the anchor transaction and its
record heals on the next attempt without a second transaction; a batch whose every attempt
failed is failed; the `notarization.anchored` events go out once per project and chunk."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, cast

import orjson
import pytest
from sqlalchemy import select

from entryway.chain.rpc import EthClient
from entryway.domain.notarization import ANCHOR_TASK, BatchState
from entryway.domain.proof import AnchorRecord, InclusionProof
from entryway.domain.tasks import Task
from entryway.notary.anchor import Anchorer, AnchorError
from entryway.notary.anchoring import AnchorBatchHandler
from entryway.notary.verify import verify_on_chain
from entryway.storage.notary import NotaryStore
from entryway.storage.schema import webhook_events
from tests.integration.conftest import CHAIN_ID
from tests.integration.notary.conftest import NotaryRig

pytestmark = pytest.mark.anvil


async def _bulk(rig: NotaryRig, count: int, key: str | None = None) -> list[str]:
    items = [{"documentHash": "0x" + os.urandom(32).hex()} for _ in range(count)]
    answer = await rig.client.post(
        "/v1/notarizations/bulk",
        headers=rig.auth(key),
        json={"chainId": CHAIN_ID, "items": items},
    )
    assert answer.status_code == 202, answer.text
    return [n["id"] for n in answer.json()["notarizations"]]


async def _sealed_task(rig: NotaryRig) -> Task:
    batch = await rig.store.seal(CHAIN_ID, 100)
    assert batch is not None
    [task] = await rig.store.queue.claim("test-worker", [ANCHOR_TASK], lease_seconds=60)
    assert task.payload["batchId"] == batch.batch_id
    return task


async def _events(rig: NotaryRig, project_id: str) -> list[dict[str, Any]]:
    async with rig.services.store.engine.connect() as db:
        bodies = await db.execute(
            select(webhook_events.c.body).where(webhook_events.c.project_id == project_id)
        )
        return [orjson.loads(b)["data"] for (b,) in bodies]


async def test_a_crash_between_anchoring_and_recording_heals_on_retry(
    rig: NotaryRig, eth: EthClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    await rig.webhooks.create_endpoint(
        rig.project_id, "https://hooks.example.org/a", ["notarization.anchored"]
    )
    ids = await _bulk(rig, 5)
    task = await _sealed_task(rig)
    real_record = NotaryStore.record_anchor

    async def crash(self: NotaryStore, batch_id: str, root: bytes, anchor: AnchorRecord) -> bool:
        raise ConnectionError("the worker died here")

    monkeypatch.setattr(NotaryStore, "record_anchor", crash)
    submitter = rig.anchorer.transactor.address
    nonce_before = await eth.get_nonce(submitter)
    with pytest.raises(ConnectionError):
        await rig.handler(task)
    assert await eth.get_nonce(submitter) == nonce_before + 1  # the root went on chain...
    pending = (await rig.client.get(f"/v1/notarizations/{ids[0]}", headers=rig.auth())).json()
    assert pending["status"] == "pending"  # ...but nothing was recorded

    monkeypatch.setattr(NotaryStore, "record_anchor", real_record)
    outcome = await rig.handler(task)  # the retry
    assert outcome["state"] == "anchored"
    assert await eth.get_nonce(submitter) == nonce_before + 1  # found, not sent again
    for notarization_id in ids:
        got = await rig.client.get(f"/v1/notarizations/{notarization_id}", headers=rig.auth())
        proof = InclusionProof.from_dict(got.json()["proof"])
        assert "0x" + proof.anchor.transaction_hash.hex() == outcome["transactionHash"]
        assert (await verify_on_chain(proof, eth)).valid
    await rig.handler(task)  # a third run (a takeover after success) changes nothing
    events = await _events(rig, rig.project_id)
    assert len(events) == 1 and sorted(n["id"] for n in events[0]["notarizations"]) == sorted(ids)


async def test_events_go_per_project_in_chunks(rig: NotaryRig) -> None:
    other_id, other_key = await rig.new_project()
    for project_id in (rig.project_id, other_id):
        await rig.webhooks.create_endpoint(
            project_id, "https://hooks.example.org/b", ["notarization.anchored"]
        )
    mine = await _bulk(rig, 5)
    theirs = await _bulk(rig, 2, other_key)
    task = await _sealed_task(rig)
    handler = AnchorBatchHandler(rig.store, rig.handler.anchorers, rig.webhooks, event_chunk=2)
    await handler(task)
    my_events = await _events(rig, rig.project_id)
    assert sorted((e["part"], e["parts"]) for e in my_events) == [(1, 3), (2, 3), (3, 3)]
    assert sorted(n["id"] for e in my_events for n in e["notarizations"]) == sorted(mine)
    their_events = await _events(rig, other_id)
    assert [len(e["notarizations"]) for e in their_events] == [2]
    assert sorted(n["id"] for n in their_events[0]["notarizations"]) == sorted(theirs)
    assert all(e["leafCount"] == 7 for e in my_events + their_events)


class _BrokenAnchorer:
    async def anchor(self, root: bytes, leaf_count: int) -> AnchorRecord:
        raise AnchorError("the node refused the transaction")


async def test_a_batch_whose_last_attempt_fails_is_failed(rig: NotaryRig) -> None:
    [notarization_id] = await _bulk(rig, 1)
    task = await _sealed_task(rig)
    broken = cast(Anchorer, _BrokenAnchorer())
    handler = AnchorBatchHandler(rig.store, {CHAIN_ID: broken}, rig.webhooks)
    with pytest.raises(AnchorError):
        await handler(task)  # an early attempt: retried later, still pending
    got = (await rig.client.get(f"/v1/notarizations/{notarization_id}", headers=rig.auth())).json()
    assert got["status"] == "pending"

    with pytest.raises(AnchorError):
        await handler(dataclasses.replace(task, attempts=task.max_attempts))
    got = (await rig.client.get(f"/v1/notarizations/{notarization_id}", headers=rig.auth())).json()
    assert got["status"] == "failed" and "refused" in got["error"]
    batch = await rig.store.batch(str(task.payload["batchId"]))
    assert batch is not None and batch.state is BatchState.FAILED
    proof = await rig.client.get(f"/v1/notarizations/{notarization_id}/proof", headers=rig.auth())
    assert proof.status_code == 409 and proof.json()["notarizationStatus"] == "failed"
