"""A reorg on a real anvil that removes the block a notary batch was anchored in: the
chain's follower sees the block go, the batch is sealed and anchored again, its proofs are
those of the new anchor, `entryway verify` accepts them on chain, and the project receives
`notarization.reanchored`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import orjson
from sqlalchemy import select

from entryway.chain.finality import Finality
from entryway.chain.follower import BlockRef
from entryway.chain.following import ChainFollower
from entryway.chain.rpc import EthClient
from entryway.domain.notarization import ANCHOR_TASK
from entryway.storage.notary_reanchor import Unanchored, unanchor_in_blocks
from entryway.storage.schema import webhook_events
from tests.integration.conftest import CHAIN_ID
from tests.integration.notary.conftest import NotaryRig

ENTRYWAY = Path(sys.executable).with_name("entryway")


async def _notarize(rig: NotaryRig, count: int) -> list[str]:
    items = [{"documentHash": "0x" + os.urandom(32).hex()} for _ in range(count)]
    answer = await rig.client.post(
        "/v1/notarizations/bulk", headers=rig.auth(), json={"chainId": CHAIN_ID, "items": items}
    )
    assert answer.status_code == 202, answer.text
    return [n["id"] for n in answer.json()["notarizations"]]


async def _run_anchor_task(rig: NotaryRig) -> dict[str, object]:
    [task] = await rig.store.queue.claim("test-worker", [ANCHOR_TASK], lease_seconds=60)
    return await rig.handler(task)


async def _proof(rig: NotaryRig, notarization_id: str) -> dict[str, object]:
    got = await rig.client.get(f"/v1/notarizations/{notarization_id}", headers=rig.auth())
    return dict(got.json())


def _verify(proof: object, tmp_path: Path, rpc_url: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / f"proof-{os.urandom(4).hex()}.json"
    path.write_text(json.dumps(proof))
    return subprocess.run(
        [str(ENTRYWAY), "verify", str(path), "--rpc-url", rpc_url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_a_reorg_of_the_anchor_block_reanchors_and_the_new_proof_verifies(
    rig: NotaryRig, eth: EthClient, tmp_path: Path
) -> None:
    await rig.webhooks.create_endpoint(
        rig.project_id, "https://hooks.example.org/n", ["notarization.reanchored"]
    )
    unanchored: list[Unanchored] = []

    async def removed(chain_id: int, blocks: list[BlockRef]) -> None:
        unanchored.extend(await unanchor_in_blocks(rig.store, chain_id, [b.number for b in blocks]))

    follower = ChainFollower(eth, CHAIN_ID, Finality(1, 16), on_removed=removed)
    await follower.step()
    snapshot = await eth.rpc.request("evm_snapshot")
    ids = await _notarize(rig, 3)
    assert await rig.store.seal(CHAIN_ID, 100) is not None
    first = await _run_anchor_task(rig)
    assert first["state"] == "anchored"
    old = await _proof(rig, ids[0])
    assert old["status"] == "anchored"
    await follower.step()
    old_block = old["proof"]["blockNumber"]  # type: ignore[index]

    # The reorg: the chain as it was before the anchor, and two other blocks on it.
    assert await eth.rpc.request("evm_revert", [snapshot]) is True
    await eth.rpc.request("anvil_mine", ["0x2"])
    removed_now = await follower.step()
    assert old_block in [b.number for b in removed_now]
    assert [u.block_number for u in unanchored] == [old_block]
    assert (await _proof(rig, ids[0]))["status"] == "pending"  # no proof of a removed anchor
    rpc_url = eth.rpc.url
    stale = _verify(old["proof"], tmp_path, rpc_url)
    assert stale.returncode == 1, stale.stdout + stale.stderr  # the old proof no longer holds

    again = await _run_anchor_task(rig)
    assert again["state"] == "anchored"
    for notarization_id in ids:
        new = await _proof(rig, notarization_id)
        assert new["status"] == "anchored"
        assert new["proof"]["blockNumber"] > old_block  # type: ignore[index]
        checked = _verify(new["proof"], tmp_path, rpc_url)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    async with rig.services.store.engine.connect() as db:
        bodies = [
            orjson.loads(b)
            for (b,) in await db.execute(
                select(webhook_events.c.body).where(webhook_events.c.project_id == rig.project_id)
            )
        ]
    reanchored = [b for b in bodies if b["type"] == "notarization.reanchored"]
    assert len(reanchored) == 1
    data = reanchored[0]["data"]
    assert data["reanchors"] == 1 and data["transactionHash"] == again["transactionHash"]
    assert sorted(n["id"] for n in data["notarizations"]) == sorted(ids)
