"""`entryway serve --config FILE`: the one-process form for an operator on a real chain, here
a plain anvil with `entryway deploy` run on it. One process serves the API, runs the worker
and leads the chain's bundling, on SQLite in the data directory or on PostgreSQL: an op sent
over raw JSON-RPC is included. SIGKILLed the moment an op's hash came back, then started
again on the same database, it never answers `not_found` for the op, bundles it from the
intake, and settles its charge. A chain without executor keys cannot be served this way."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from entryway.bundler.rpc_types import user_operation_json
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.domain.apikeys import KeyEnvironment
from entryway.domain.plans import PlanName
from entryway.storage.engine import make_engine, sqlite_url
from entryway.storage.schema import usage_events
from entryway.storage.store import Store
from tests.integration.postgres import fresh_database
from tests.integration.test_bundler_failover import harness_for, own_gas_op
from tests.integration.test_config_processes import (
    CHAIN_ID,
    ENTRYWAY,
    Deployed,
    _clean_environment,
    _free_port,
    _until_healthy,
    anvil_with_entryway,
    config,
    run,
)
from tests.running import statuses_until_final

pytestmark = pytest.mark.anvil
DEADLINE_S = 60.0
ENTRY_POINT_V08 = "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108"


async def serve(path: Path, port: int) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        ENTRYWAY, "serve", "--config", str(path), "--port", str(port),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        env=_clean_environment(),
    )  # fmt: skip
    await _until_healthy(proc, f"http://127.0.0.1:{port}/healthz")
    return proc


async def stopped(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.send_signal(signal.SIGINT)
        await asyncio.wait_for(proc.wait(), 30)


async def send_op(d: Deployed, port: int, key: str) -> str:
    """An own-gas op sent over raw JSON-RPC; the hash the service returned."""
    async with JsonRpcClient(d.rpc_url) as rpc:
        op = await own_gas_op(harness_for(d, EthClient(rpc)))
    body = {
        "jsonrpc": "2.0", "id": 1, "method": "eth_sendUserOperation",
        "params": [user_operation_json(op), ENTRY_POINT_V08],
    }  # fmt: skip
    async with httpx.AsyncClient(timeout=30) as http:
        answer = (
            await http.post(
                f"http://127.0.0.1:{port}/rpc/{CHAIN_ID}",
                json=body,
                headers={"Authorization": f"Bearer {key}"},
            )
        ).json()
    assert "result" in answer, answer
    return str(answer["result"])


async def admin_key(url: str, email: str) -> str:
    """An admin key of a new FREE project on the chain, written to the service's database."""
    engine = make_engine(url)
    try:
        store = Store(engine)
        now = datetime.now(UTC)
        owner = await store.create_user(email, now)
        project = await store.create_project(owner, "p", PlanName.FREE, [CHAIN_ID], now)
        return (await store.issue_key(project, KeyEnvironment.TEST, [CHAIN_ID], now)).secret
    finally:
        await engine.dispose()


async def charge_states(url: str, op_hash: str) -> list[str]:
    engine = make_engine(url)
    try:
        async with engine.connect() as db:
            rows = await db.execute(
                select(usage_events.c.status).where(usage_events.c.reference == op_hash)
            )
            return [row.status for row in rows]
    finally:
        await engine.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
async def database(request: pytest.FixtureRequest) -> AsyncIterator[str | None]:
    """The database `entryway serve` is given: none (SQLite in its data directory), or a
    fresh PostgreSQL database."""
    if request.param == "sqlite":
        yield None
        return
    async with fresh_database("entryway serve on PostgreSQL") as (url, _):
        yield url


async def test_serve_survives_a_sigkill_right_after_the_hash_returns(
    tmp_path: Path, database: str | None
) -> None:
    async with anvil_with_entryway(tmp_path, CHAIN_ID) as d:
        path = config(d, "serve", database_url=database)
        url = database or sqlite_url(d.root / "data-serve")
        port = _free_port()
        proc = await serve(path, port)  # the schema is made at start
        try:
            key = await admin_key(url, "serve@example.org")
            first = await send_op(d, port, key)
            assert (
                await statuses_until_final(
                    f"http://127.0.0.1:{port}", key, CHAIN_ID, first, within_s=DEADLINE_S
                )
            )[-1] == "included"

            op_hash = await send_op(d, port, key)
            proc.send_signal(signal.SIGKILL)  # the moment the hash came back
            await proc.wait()
        finally:
            await stopped(proc)
        proc = await serve(path, port)
        try:
            seen = await statuses_until_final(
                f"http://127.0.0.1:{port}", key, CHAIN_ID, op_hash, within_s=DEADLINE_S
            )
            assert "not_found" not in seen, seen
            assert seen[-1] == "included", seen
            loop = asyncio.get_running_loop()
            deadline = loop.time() + DEADLINE_S
            while "held" in (states := await charge_states(url, op_hash)):
                assert loop.time() < deadline, states
                await asyncio.sleep(0.5)
            assert states and set(states) <= {"settled", "released"}, states
        finally:
            await stopped(proc)


async def test_serve_refuses_a_chain_without_executor_keys(tmp_path: Path) -> None:
    async with anvil_with_entryway(tmp_path, CHAIN_ID) as d:
        path = config(d, "keyless")
        text = path.read_text().replace(
            f'executor_key_files = ["{d.keys / "executor.key"}"]', "executor_key_files = []"
        )
        path.write_text(text)
        code, out = await run("serve", "--config", str(path), "--port", str(_free_port()))
        assert code == 2, out
        assert f"chain {CHAIN_ID} has no executor_key_files" in out, out
