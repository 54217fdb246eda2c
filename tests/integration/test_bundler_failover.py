"""The multi-process bundling path, as an operator runs it on PostgreSQL: a plain anvil with
Entryway deployed, `entryway migrate`, one `entryway api` whose chain has
`bundling = "intake"` (no executor key), and two `entryway bundler --chain N` processes, a
leader and a standby, each a real subprocess.

Ops sent through the API are included; the leader SIGKILLed with ops in flight, the standby
takes over within 10 s and bundles them; the API SIGKILLed right after it returned a hash,
the op is still included, and so it is with the API and the leader killed together and a
bundler started later; and no op is charged twice: one relay charge per op. A leader killed
right after sending a bundle, before it was mined: the standby waits for that bundle and
records its ops included with its transaction, none dropped."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from eth_account import Account
from sqlalchemy import select

from entryway import contracts
from entryway.bundler.rpc_types import user_operation_json
from entryway.bundler.states import OpStatus
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.chain.transactor import Transactor
from entryway.deploy.deployer import Deployment
from entryway.deploy.plan import Operator, plan_deployment
from entryway.domain.apikeys import KeyEnvironment
from entryway.domain.evm import to_hex
from entryway.domain.plans import PlanName
from entryway.domain.userop import UserOperation, user_op_hash
from entryway.storage.engine import make_engine
from entryway.storage.intake import OpIntakeStore, intake_row, write_intake_rows
from entryway.storage.schema import usage_events
from entryway.storage.store import Store
from tests.integration.harness import ETHER, Harness
from tests.integration.postgres import fresh_database
from tests.integration.test_config_processes import (
    ENTRYWAY,
    Deployed,
    _clean_environment,
    _free_port,
    _until_healthy,
    anvil_with_entryway,
    run,
)

CHAIN_ID = 84532
EP = contracts.load("EntryPoint").abi
TAKEOVER_S = 10.0


@pytest.fixture
async def database() -> AsyncIterator[str]:
    """A fresh PostgreSQL database for the processes; dropped at the end."""
    async with fresh_database("failover drill") as (url, _):
        yield url


def write_config(d: Deployed, name: str, database_url: str, *, executors: bool) -> Path:
    keys = f'["{d.keys / "executor.key"}"]' if executors else "[]"
    lines = [
        f'data_dir = "{d.root / "data"}"',
        f'database_url = "{database_url}"',
        "[[chains]]",
        f"chain_id = {CHAIN_ID}",
        f'rpc_urls = ["{d.rpc_url}"]',
        'bundling = "intake"',
        f"executor_key_files = {keys}",
        f'paymaster_signer_key_file = "{d.keys / "signer.key"}"',
        f'notary_submitter_key_file = "{d.keys / "notary.key"}"',
        f'deploy_owner = "{(d.keys / "owner").read_text()}"',
    ]
    path = d.root / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


async def spawn(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        ENTRYWAY, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        env=_clean_environment(),
    )  # fmt: skip


async def leading(proc: asyncio.subprocess.Process, within: float) -> None:
    """Until the bundler process says it leads the chain."""
    assert proc.stdout is not None
    deadline = time.monotonic() + within
    while True:
        line = await asyncio.wait_for(proc.stdout.readline(), deadline - time.monotonic())
        assert line, "the bundler exited before leading"
        if json.loads(line) == {"leading": CHAIN_ID}:
            return


def harness_for(d: Deployed, eth: EthClient) -> Harness:
    signer = Account.from_key((d.keys / "signer.key").read_text().strip())
    notary = Account.from_key((d.keys / "notary.key").read_text().strip())
    operator = Account.from_key((d.keys / "operator.key").read_text().strip())
    plan = plan_deployment(Operator(operator.address, signer.address, notary.address))
    deployment = Deployment(
        CHAIN_ID, plan.entry_point.address, plan.account_factory.address,
        plan.paymaster.address, plan.notary.address,
    )  # fmt: skip
    return Harness(eth, CHAIN_ID, deployment, signer, operator, Transactor(eth, operator, CHAIN_ID))


async def own_gas_op(harness: Harness) -> UserOperation:
    owner = harness.new_key()
    op = await harness.build_op(owner.address, b"")
    await harness.fund(op.sender, ETHER)
    return harness.sign(op, owner)


class Api:
    def __init__(self, port: int, key: str, entry_point: str) -> None:
        self.url = f"http://127.0.0.1:{port}/rpc/{CHAIN_ID}"
        self.headers = {"Authorization": f"Bearer {key}"}
        self.entry_point = entry_point

    async def call(self, method: str, *params: Any) -> Any:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)}
        async with httpx.AsyncClient(headers=self.headers, timeout=30) as http:
            answer = (await http.post(self.url, json=body)).json()
        assert "result" in answer, answer
        return answer["result"]

    async def send(self, op: UserOperation) -> str:
        return str(
            await self.call("eth_sendUserOperation", user_operation_json(op), self.entry_point)
        )


async def included(intake: OpIntakeStore, hashes: list[str], within: float) -> None:
    """Until every op's intake row says included (the leader read it on the chain)."""
    deadline = time.monotonic() + within
    rows: dict[str, Any] = {}
    while time.monotonic() < deadline:
        rows = {h: await intake.get(CHAIN_ID, h) for h in hashes}
        if all(r is not None and r.status is OpStatus.INCLUDED for r in rows.values()):
            return
        await asyncio.sleep(0.2)
    raise AssertionError({h: r and (r.status, r.reason) for h, r in rows.items()})


async def test_leader_and_api_killed_outright_lose_no_op_and_charge_none_twice(
    tmp_path: Path, database: str
) -> None:
    async with anvil_with_entryway(tmp_path, CHAIN_ID) as d:
        api_config = write_config(d, "api", database, executors=False)
        bundler_config = write_config(d, "bundler", database, executors=True)
        code, out = await run("migrate", "--config", str(bundler_config))
        assert code == 0, out
        code, out = await run("bundler", "--config", str(api_config), "--chain", str(CHAIN_ID))
        assert code == 1 and "needs its executor keys" in out, out  # the API's file has none
        engine = make_engine(database)
        procs: list[asyncio.subprocess.Process] = []
        try:
            store = Store(engine)
            now = datetime.now(UTC)
            owner = await store.create_user("ops@example.com", now)
            project = await store.create_project(owner, "p", PlanName.FREE, [CHAIN_ID], now)
            key = (await store.issue_key(project, KeyEnvironment.TEST, [CHAIN_ID], now)).secret
            intake = OpIntakeStore(engine)

            port = _free_port()
            api_proc = await spawn("api", "--config", str(api_config), "--port", str(port))
            procs.append(api_proc)
            first = await spawn("bundler", "--config", str(bundler_config), "--chain", "84532")
            procs.append(first)
            await leading(first, 60)
            standby = await spawn("bundler", "--config", str(bundler_config), "--chain", "84532")
            procs.append(standby)
            await _until_healthy(api_proc, f"http://127.0.0.1:{port}/healthz")

            async with JsonRpcClient(d.rpc_url) as rpc:
                harness = harness_for(d, EthClient(rpc))
                api = Api(port, key, harness.deployment.entry_point)

                # The leader bundles what the API wrote; every replica answers from the row.
                hashes = [await api.send(await own_gas_op(harness)) for _ in range(3)]
                await included(intake, hashes, 60)
                status = await api.call("entryway_getUserOperationStatus", hashes[0])
                assert status["status"] == "included"
                receipt = await api.call("eth_getUserOperationReceipt", hashes[0])
                assert receipt["success"] is True

                # The leader killed outright with ops in flight: the standby takes over.
                ops = [await own_gas_op(harness) for _ in range(3)]
                in_flight = [await api.send(op) for op in ops]
                first.send_signal(signal.SIGKILL)
                killed_at = time.monotonic()
                await leading(standby, TAKEOVER_S + 5)
                assert time.monotonic() - killed_at < TAKEOVER_S
                await included(intake, in_flight, 60)
                hashes += in_flight

                # The API killed right after it returned a hash: the op is still bundled.
                last = await api.send(await own_gas_op(harness))
                api_proc.send_signal(signal.SIGKILL)
                await included(intake, [last], 60)
                hashes.append(last)
                row = await intake.get(CHAIN_ID, last)
                assert row is not None and row.tx_hash is not None
                mined = await harness.eth.get_receipt(row.tx_hash)
                assert mined is not None

                # Both killed at once, right after the hash: a bundler started later bundles it.
                port = _free_port()
                api_proc = await spawn("api", "--config", str(api_config), "--port", str(port))
                procs.append(api_proc)
                await _until_healthy(api_proc, f"http://127.0.0.1:{port}/healthz")
                api = Api(port, key, harness.deployment.entry_point)
                orphan = await api.send(await own_gas_op(harness))
                for proc in (api_proc, standby):
                    proc.send_signal(signal.SIGKILL)
                late = await spawn("bundler", "--config", str(bundler_config), "--chain", "84532")
                procs.append(late)
                await leading(late, TAKEOVER_S + 5)
                await included(intake, [orphan], 60)
                hashes.append(orphan)

            async with engine.connect() as db:
                refs = (
                    (
                        await db.execute(
                            select(usage_events.c.reference).where(
                                # every op's relay charge, whatever the op did
                                usage_events.c.idempotency_key.like("userop:%")
                            )
                        )
                    )
                    .scalars()
                    .all()
                )
            assert sorted(refs) == sorted(hashes)  # one relay charge per op, none twice
        finally:
            for proc in procs:
                if proc.returncode is None:
                    proc.send_signal(signal.SIGKILL)
                    await proc.wait()
            await engine.dispose()


async def test_a_leader_killed_with_its_bundle_pending_leaves_its_ops_included_never_dropped(
    tmp_path: Path, database: str
) -> None:
    """The leader sends a bundle and is SIGKILLed before that bundle is mined (the node mines
    on demand here), so before it could record anything. The standby takes over while the
    bundle still waits in the node's mempool: it waits for it rather than validate the ops
    again, and once the block is mined records each op included with that bundle's
    transaction; none is dropped, none sent again."""
    async with anvil_with_entryway(tmp_path, CHAIN_ID) as d:
        bundler_config = write_config(d, "bundler", database, executors=True)
        code, out = await run("migrate", "--config", str(bundler_config))
        assert code == 0, out
        executor = Account.from_key((d.keys / "executor.key").read_text().strip()).address
        engine = make_engine(database)
        intake = OpIntakeStore(engine)
        procs: list[asyncio.subprocess.Process] = []
        chain = ("bundler", "--config", str(bundler_config), "--chain", str(CHAIN_ID))
        port = _free_port()
        try:
            first = await spawn(*chain)
            procs.append(first)
            await leading(first, 60)
            standby = await asyncio.create_subprocess_exec(
                ENTRYWAY, *chain, "--http-port", str(port),
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                env=_clean_environment(),
            )  # fmt: skip
            procs.append(standby)
            logged = Lines(standby)
            async with JsonRpcClient(d.rpc_url) as rpc:
                eth = EthClient(rpc)
                harness = harness_for(d, eth)
                ops = [await own_gas_op(harness) for _ in range(3)]
                await eth.rpc.request("evm_setAutomine", [False])
                try:
                    ep = harness.deployment.entry_point
                    hashes = [to_hex(user_op_hash(op, ep, CHAIN_ID)) for op in ops]
                    rows = [
                        intake_row(
                            chain_id=CHAIN_ID,
                            user_op_hash=h,
                            entry_point=ep,
                            op=op,
                            project_id=None,
                            at=datetime.now(UTC),
                        )
                        for h, op in zip(hashes, ops, strict=True)
                    ]
                    async with engine.begin() as db:  # at once: the leader bundles them together
                        await write_intake_rows(db, rows)
                    # The leader's bundle sent (its executor's pending nonce moved), not mined.
                    await until(lambda: bundle_pending(eth, executor), 60)
                    first.send_signal(signal.SIGKILL)
                    await first.wait()
                    [bundle] = (await eth.rpc.request("txpool_content", []))["pending"].values()
                    [tx_hash] = [tx["hash"] for tx in bundle.values()]
                    await leading(standby, TAKEOVER_S + 5)

                    async def settled_or_waiting() -> bool:
                        rows = [await intake.get(CHAIN_ID, h) for h in hashes]
                        waits = logged.has("waiting for the previous leader's bundles")
                        return waits or any(
                            r is not None and r.status is not OpStatus.PENDING for r in rows
                        )

                    await until(settled_or_waiting, 30)
                    for op_hash in hashes:  # loaded by nobody while the bundle is pending
                        row = await intake.get(CHAIN_ID, op_hash)
                        assert row is not None and row.reason is None
                        # As the dead leader left it: pending, or submitted if it wrote that
                        # back before it was killed.
                        assert row.status in (OpStatus.PENDING, OpStatus.SUBMITTED), row
                    await eth.rpc.request("evm_mine", [])
                finally:
                    await eth.rpc.request("evm_setAutomine", [True])
                await included(intake, hashes, 60)
                # The ops the dead leader's bundle carried (all of them, unless it had sent
                # a first bundle before the others reached it) name that bundle; any other
                # was validated and bundled by the new leader.
                receipt = await eth.get_receipt(tx_hash)
                assert receipt is not None
                topic = EP.event_topic("UserOperationEvent")
                carried = {to_hex(g.topics[1]) for g in receipt.logs if g.topics[0] == topic}
                assert carried and carried <= set(hashes)
                for op_hash in hashes:
                    row = await intake.get(CHAIN_ID, op_hash)
                    assert row is not None and row.reason is None and row.tx_hash is not None
                    assert (row.tx_hash == tx_hash) == (op_hash in carried)
            async with httpx.AsyncClient() as http:
                scraped = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
            assert f'entryway_userops_dropped_total{{chain="{CHAIN_ID}"}} 0.0' in scraped
            sent = 0 if carried == set(hashes) else 1
            assert f'entryway_bundles_sent_total{{chain="{CHAIN_ID}"}} {sent}.0' in scraped
        finally:
            for proc in procs:
                if proc.returncode is None:
                    proc.send_signal(signal.SIGKILL)
                    await proc.wait()
            await engine.dispose()


async def bundle_pending(eth: EthClient, executor: str) -> bool:
    return await eth.get_nonce(executor, "pending") > await eth.get_nonce(executor, "latest")


async def until(condition: Callable[[], Awaitable[bool]], within: float) -> None:
    deadline = time.monotonic() + within
    while not await condition():
        assert time.monotonic() < deadline, "never happened"
        await asyncio.sleep(0.05)


class Lines:
    """A process's standard error, read as it comes (so the pipe never fills)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stderr is not None
        self.lines: list[str] = []
        self._task = asyncio.create_task(self._read(proc.stderr))

    async def _read(self, stream: asyncio.StreamReader) -> None:
        while line := await stream.readline():
            self.lines.append(line.decode(errors="replace"))

    def has(self, text: str) -> bool:
        return any(text in line for line in self.lines)
