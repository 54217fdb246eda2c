"""The promise of `entryway up`: an op whose hash was returned ends included after a SIGKILL
of the process that accepted it, the moment the hash came back. Started again on the same
data directory, the service never answers `not_found` for it, its leader bundles it from the
intake, and its sponsorship's hold is settled."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest
from entryway_sdk import Entryway
from eth_account import Account
from sqlalchemy import select

from entryway.devnet.anvil import free_port
from entryway.storage.engine import make_engine, sqlite_url
from entryway.storage.schema import usage_events
from tests.running import start, statuses_until_final, stop

pytestmark = pytest.mark.anvil
CHAIN = 80002
DEADLINE_S = 90.0


async def sponsored_op(url: str, demo: dict[str, Any]) -> str:
    """A sponsored op (it also deploys the wallet) sent with the SDK; its hash."""
    async with await Entryway.init(
        api_key=demo["serviceKey"],
        rpc_url=demo["chains"][str(CHAIN)]["rpcUrl"],
        chain_id=CHAIN,
        base_url=url,
    ) as client:
        wallet = await client.wallet(Account.create())
        op = await wallet.send([{"to": Account.create().address, "data": b"gm"}])
        return op.user_op_hash


async def hold_states(data_dir: Path, op_hash: str) -> list[str]:
    """The states of the charges the op's hash names (its relay and its sponsorship)."""
    engine = make_engine(sqlite_url(data_dir))
    try:
        async with engine.connect() as db:
            rows = await db.execute(
                select(usage_events.c.status).where(usage_events.c.reference == op_hash)
            )
            return [row.status for row in rows]
    finally:
        await engine.dispose()


async def settled(data_dir: Path, op_hash: str) -> list[str]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while "held" in (states := await hold_states(data_dir, op_hash)):
        assert loop.time() < deadline, f"the op's hold is still held: {states}"
        await asyncio.sleep(0.5)
    return states


async def test_an_op_accepted_just_before_a_sigkill_is_included_after_the_restart(
    tmp_path: Path,
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = await start(tmp_path, port)
    try:
        demo = json.loads((tmp_path / "demo.json").read_text())
        op_hash = await sponsored_op(url, demo)
        proc.send_signal(signal.SIGKILL)  # the moment the hash came back
        await proc.wait()
    finally:
        await stop(proc)
    proc = await start(tmp_path, port)
    try:
        demo = json.loads((tmp_path / "demo.json").read_text())
        seen = await statuses_until_final(
            url, demo["serviceKey"], CHAIN, op_hash, within_s=DEADLINE_S
        )
        assert "not_found" not in seen, seen
        assert seen[-1] == "included", seen
        states = await settled(tmp_path, op_hash)
        assert states and "settled" in states, states
        async with httpx.AsyncClient(base_url=url) as http:
            # The leader runs in this process: its executors and bundles are reported here.
            ready = (await http.get("/readyz")).json()
            assert f"chain.{CHAIN}.executors" in ready["checks"], ready
            metrics = (await http.get("/metrics")).text
        sent = [
            line for line in metrics.splitlines()
            if line.startswith(f'entryway_bundles_sent_total{{chain="{CHAIN}"}}')
        ]  # fmt: skip
        assert sent and float(sent[0].split()[-1]) >= 1, sent
    finally:
        await stop(proc)
