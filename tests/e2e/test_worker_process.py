"""A split deployment: `entryway up --no-worker` takes requests, `entryway worker` processes
do the durable work. Notarizations wait until a worker runs; a worker killed with SIGKILL is
replaced and the batch is anchored exactly once."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import httpx

from entryway.devnet.anvil import free_port
from tests.running import ENTRYWAY, start, stop


async def worker(data_dir: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        ENTRYWAY, "worker", "--data-dir", str(data_dir), "--poll-interval", "0.2",
        "--lease-seconds", "2",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip


async def test_a_separate_worker_anchors_and_a_killed_one_is_replaced(tmp_path: Path) -> None:
    port = free_port()
    service = await start(tmp_path, port, "--no-worker")
    workers: list[asyncio.subprocess.Process] = []
    try:
        demo = json.loads((tmp_path / "demo.json").read_text())
        auth = {"Authorization": f"Bearer {demo['apiKey']}"}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            body = {"chainId": 80002, "mode": "direct", "documentHash": "0x" + "ab" * 32}
            r = await http.post("/v1/notarizations", headers=auth, json=body)
            assert r.status_code == 202, r.text
            nid = r.json()["id"]

            async def status() -> str:
                got = await http.get(f"/v1/notarizations/{nid}", headers=auth)
                return str(got.json()["status"])

            await asyncio.sleep(1.5)
            assert await status() == "pending"  # nobody anchors without a worker

            first = await worker(tmp_path)
            workers.append(first)
            await asyncio.sleep(0.3)
            first.send_signal(signal.SIGKILL)  # maybe mid-task: its lease will expire
            await first.wait()
            workers.append(await worker(tmp_path))
            for _ in range(150):
                if await status() == "anchored":
                    break
                await asyncio.sleep(0.2)
            assert await status() == "anchored"
            proof = (await http.get(f"/v1/notarizations/{nid}/proof", headers=auth)).json()
        # Anchored once: one Anchored event for the root, in the proof's transaction.
        from entryway.contracts import load

        topic = "0x" + load("NotaryAnchor").abi.event_topic("Anchored").hex()
        query = {"address": proof["contract"], "fromBlock": "0x0", "topics": [topic, proof["root"]]}
        async with httpx.AsyncClient() as node:
            answer = await node.post(
                demo["chains"]["80002"]["rpcUrl"],
                json={"jsonrpc": "2.0", "id": 1, "method": "eth_getLogs", "params": [query]},
            )
        logs = answer.json()["result"]
        assert [log["transactionHash"] for log in logs] == [proof["transactionHash"]]
    finally:
        for w in workers:
            if w.returncode is None:
                w.send_signal(signal.SIGTERM)
                await asyncio.wait_for(w.wait(), 30)
        await stop(service)
