"""Notarization through the running `entryway up`: a document uploaded, anchored directly, its
proof verified by `entryway verify` offline and against the devnet; a tampered copy fails."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.test_up import service  # noqa: F401 - the fixture
from tests.running import ENTRYWAY


async def verify(*args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        ENTRYWAY, "verify", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    return int(proc.returncode or 0), out.decode()


async def test_a_document_is_anchored_and_its_proof_verifies(
    service: tuple[str, dict[str, Any], Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    url, demo, _ = service
    auth = {"Authorization": f"Bearer {demo['apiKey']}", "Idempotency-Key": "contract-42"}
    document = b"Contract 42: Alice sells Bob one bicycle.\n"
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        before = (await http.get("/v1/credits", headers=auth)).json()["balance"]
        form = {"chainId": "80002", "mode": "direct", "label": "contract 42"}
        files = {"file": ("contract.txt", document, "text/plain")}
        r = await http.post("/v1/notarizations/document", headers=auth, data=form, files=files)
        assert r.status_code == 202, r.text
        notarization = r.json()
        again = await http.post("/v1/notarizations/document", headers=auth, data=form, files=files)
        assert again.json()["id"] == notarization["id"]  # a retry, charged once
        for _ in range(100):
            state = (await http.get(f"/v1/notarizations/{notarization['id']}", headers=auth)).json()
            if state["status"] != "pending":
                break
            await asyncio.sleep(0.2)
        assert state["status"] == "anchored", state
        proof = (await http.get(f"/v1/notarizations/{state['id']}/proof", headers=auth)).json()
        after = (await http.get("/v1/credits", headers=auth)).json()["balance"]
    # 500 + 10 x 1 KiB x 2 steps: the anchor's and the service's hashing (docs/pricing.md)
    assert before - after == 520

    proof_file = tmp_path / "proof.json"
    proof_file.write_text(json.dumps(proof))
    original, tampered = tmp_path / "contract.txt", tmp_path / "tampered.txt"
    original.write_bytes(document)
    tampered.write_bytes(document.replace(b"one", b"two"))
    rpc_url = demo["chains"]["80002"]["rpcUrl"]
    status, out = await verify(str(proof_file), "--document", str(original), "--rpc-url", rpc_url)
    assert status == 0, out
    status, out = await verify(str(proof_file), "--document", str(tampered))
    assert status == 1 and "document" in out.lower(), out
