"""The production path as an operator runs it, every part a real process on PostgreSQL and
Redis, against a node Entryway did not start: a plain anvil as Base Sepolia with
`entryway deploy` run on it, ONE config file (`bundling = "intake"`, the chain behind two RPC
URLs: a proxy the test controls, then anvil itself), `entryway migrate`, two `entryway api`
replicas, two `entryway worker`s and two `entryway bundler --chain 84532` (leader and standby).

Over it, alternating the replicas: the SDK quickstart, a sponsored op, a notarization whose
proof the SDK verifies, a webhook the SDK's `verify_webhook` accepts. Then three drills, each
followed by the ledger's invariants: a worker SIGKILLed in the middle of a delivery, PostgreSQL
restarted while ops are sent, the first RPC URL gone."""

from __future__ import annotations

import asyncio
import base64
import os
import secrets
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import httpx
import pytest
from entryway_sdk import Entryway, verify_webhook
from eth_account import Account
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.bundler.rpc_types import user_operation_json
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.domain.evm import to_hex
from entryway.domain.tasks import Task
from entryway.domain.userop import user_op_hash
from entryway.storage.engine import make_engine
from entryway.storage.intake import OpIntakeStore
from entryway.storage.schema import credit_lots, projects, usage_events
from entryway.storage.tasks import TaskQueue
from tests.e2e.test_sign_in_limits import Form, outcome, sign_in
from tests.integration.harness import Harness
from tests.integration.own_postgres import Cluster, own_cluster
from tests.integration.test_bundler_failover import (
    harness_for,
    included,
    leading,
    own_gas_op,
)
from tests.integration.test_config_processes import (
    ENTRYWAY,
    Deployed,
    _clean_environment,
    _free_port,
    _until_healthy,
    anvil_with_entryway,
    run,
)
from tests.tcp_proxy import TcpProxy

pytestmark = pytest.mark.anvil

CHAIN_ID = 84532
REDIS_URL = os.environ.get("ENTRYWAY_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
OPERATOR_TOKEN = "operator-" + secrets.token_hex(16)
LEASE_SECONDS = 2.0
RELAY_KEYS = "userop:%"  # every op's relay charge, whatever the op did (a deploy, ...)


class RpcProxy(TcpProxy):
    """A TCP proxy in front of anvil that the test starts and stops: the first RPC URL."""

    def __init__(self, upstream: str) -> None:
        host_port = upstream.split("//", 1)[1].split("/", 1)[0]
        host, port = host_port.rsplit(":", 1)
        super().__init__(host, int(port))
        self.url = f"http://127.0.0.1:{self.port}"


class Receiver:
    """A webhook receiver keeping each POST's headers and raw body. While `hang` is set it
    reads a request and never answers: a slow endpoint with a delivery in flight."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self.received: asyncio.Queue[tuple[dict[str, str], bytes]] = asyncio.Queue()
        self.hang = False
        self.hung: asyncio.Event = asyncio.Event()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            headers = dict(line.split(": ", 1) for line in head[1:] if ": " in line)
            length = int({k.lower(): v for k, v in headers.items()}["content-length"])
            body = await reader.readexactly(length)
            if self.hang:
                self.hung.set()
                await reader.read()  # until the sender's connection goes
                return
            await self.received.put((headers, body))
            writer.write(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


@dataclass
class Production:
    deployed: Deployed
    database_url: str
    engine: AsyncEngine
    proxy: RpcProxy
    receiver: Receiver
    redis_proxy: TcpProxy  # the replicas' Redis, through a proxy the drills stop
    api_urls: list[str]
    workers: list[asyncio.subprocess.Process]
    logs: Path
    cluster: Cluster  # PostgreSQL, the test's own
    bundlers: list[asyncio.subprocess.Process] = field(default_factory=list)
    restart_bundler: Callable[[], Awaitable[asyncio.subprocess.Process]] | None = None
    api_key: str = ""
    project_id: str = ""
    harness: Harness | None = None
    entry_point: str = ""
    hashes: list[str] = field(default_factory=list)  # every op hash an API returned
    turn: int = 0

    def next_url(self) -> str:
        """The replicas in turn: every flow is spread across both."""
        self.turn += 1
        return self.api_urls[self.turn % len(self.api_urls)]

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    async def client(self, base_url: str | None = None) -> Entryway:
        return await Entryway.init(
            api_key=self.api_key, rpc_url=self.deployed.rpc_url, chain_id=CHAIN_ID,
            base_url=base_url or self.next_url(),
        )  # fmt: skip


def write_config(d: Deployed, database_url: str, proxy: RpcProxy, redis: TcpProxy) -> Path:
    database = urlsplit(REDIS_URL).path
    lines = [
        f'data_dir = "{d.root / "data"}"',
        f'database_url = "{database_url}"',
        f'redis_url = "redis://127.0.0.1:{redis.port}{database}"',
        f'admin_token = "{OPERATOR_TOKEN}"',
        "[secrets]",
        f'key_file = "{d.keys / "secrets-key"}"',
        "[webhooks]",
        "allow_private = true",
        "[worker]",
        f"lease_seconds = {LEASE_SECONDS}",
        "poll_interval = 0.2",
        "delivery_timeout = 30",
        "[[chains]]",
        f"chain_id = {CHAIN_ID}",
        f'rpc_urls = ["{proxy.url}", "{d.rpc_url}"]',
        'bundling = "intake"',
        f'executor_key_files = ["{d.keys / "executor.key"}"]',
        f'paymaster_signer_key_file = "{d.keys / "signer.key"}"',
        f'notary_submitter_key_file = "{d.keys / "notary.key"}"',
        f'deploy_owner = "{(d.keys / "owner").read_text()}"',
    ]
    (d.keys / "secrets-key").write_text(base64.b64encode(os.urandom(32)).decode() + "\n")
    path = d.root / "entryway.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


async def stake_the_paymaster(d: Deployed) -> None:
    """`entryway deploy` again, with ERC-7562's MIN_STAKE_VALUE: sponsored ops need a staked
    paymaster (the shared helper deploys with a smaller stake)."""
    signer, notary = (
        Account.from_key((d.keys / f"{name}.key").read_text().strip()).address
        for name in ("signer", "notary")
    )
    code, out = await run(
        "deploy", "--rpc-url", d.rpc_url, "--key-file", str(d.keys / "operator.key"),
        "--chain-id", str(CHAIN_ID), "--paymaster-signer", signer,
        "--notary-submitter", notary, "--paymaster-deposit-wei", str(10**18),
        "--paymaster-stake-wei", str(10**18),
    )  # fmt: skip
    assert code == 0, out


@pytest.fixture(scope="module")
async def production(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Production]:
    # A cluster of its own: the drills stop and restart it while other files run beside.
    with own_cluster("production path") as cluster:
        async for prod in _production(tmp_path_factory, cluster):
            yield prod


async def _production(
    tmp_path_factory: pytest.TempPathFactory, cluster: Cluster
) -> AsyncIterator[Production]:
    admin = await asyncpg.connect(cluster.admin_url, timeout=10)
    try:
        await admin.execute('CREATE DATABASE "entryway"')
    finally:
        await admin.close()
    database_url = cluster.database_url("entryway")
    root = tmp_path_factory.mktemp("production-path")
    procs: list[asyncio.subprocess.Process] = []
    logs = root / "logs"
    logs.mkdir()

    async def spawn(kind: str, *args: str, out: bool = False) -> asyncio.subprocess.Process:
        """A process from the config file; its stderr in logs/KIND-PID.log."""
        partial = logs / f"{kind}.starting.log"
        with partial.open("wb") as log:  # the child keeps its own copy
            proc = await asyncio.create_subprocess_exec(
                ENTRYWAY, *args, env=_clean_environment(),
                stdout=asyncio.subprocess.PIPE if out else asyncio.subprocess.DEVNULL,
                stderr=log,
            )  # fmt: skip
        partial.rename(logs / f"{kind}-{proc.pid}.log")  # the child's open file follows
        procs.append(proc)
        return proc

    engine = make_engine(database_url)
    proxy: RpcProxy | None = None
    redis_at = urlsplit(REDIS_URL)
    redis_proxy = TcpProxy(redis_at.hostname or "127.0.0.1", redis_at.port or 6379)
    try:
        async with anvil_with_entryway(root, CHAIN_ID) as d:
            await stake_the_paymaster(d)
            proxy = RpcProxy(d.rpc_url)
            await proxy.start()
            await redis_proxy.start()
            receiver = Receiver()
            server = await asyncio.start_server(receiver.handle, "127.0.0.1", receiver.port)
            async with server:
                path = write_config(d, database_url, proxy, redis_proxy)
                code, out = await run("migrate", "--config", str(path))
                assert code == 0, out
                config = ("--config", str(path))
                bundler = ("bundler", *config, "--chain", str(CHAIN_ID))
                leader = await spawn("bundler", *bundler, out=True)
                await leading(leader, 60)
                bundlers = [leader, await spawn("bundler", *bundler, out=True)]
                ports = [_free_port(), _free_port()]
                apis = [await spawn("api", "api", *config, "--port", str(p)) for p in ports]
                workers = [await spawn("worker", "worker", *config) for _ in range(2)]
                for api, port in zip(apis, ports, strict=True):
                    await _until_healthy(api, f"http://127.0.0.1:{port}/healthz")
                prod = Production(
                    d, database_url, engine, proxy, receiver, redis_proxy,
                    [f"http://127.0.0.1:{p}" for p in ports], workers, logs, cluster, bundlers,
                    lambda: spawn("bundler", *bundler, out=True),
                )  # fmt: skip
                async with JsonRpcClient(d.rpc_url) as rpc:
                    prod.harness = harness_for(d, EthClient(rpc))
                    prod.entry_point = prod.harness.deployment.entry_point
                    async with httpx.AsyncClient(base_url=prod.api_urls[0]) as http:
                        created = await http.post(
                            "/v1/admin/projects",
                            headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"},
                            json={"email": "ops@example.com", "name": "production",
                                  "plan": "FREE", "chains": [CHAIN_ID]},
                        )  # fmt: skip
                    assert created.status_code == 201, created.text
                    prod.api_key = created.json()["apiKey"]
                    prod.project_id = created.json()["projectId"]
                    yield prod
    finally:
        for proc in procs:
            if proc.returncode is None:
                proc.send_signal(signal.SIGKILL)
                await proc.wait()
        if proxy is not None:
            await proxy.stop()
        await redis_proxy.stop()
        await engine.dispose()  # the cluster, and the database in it, are dropped next


# ---------------------------------------------------------------- invariants


async def assert_ledger_invariants(prod: Production) -> None:
    """Nothing lost, nothing charged twice, the ledger's totals equal to its usage events."""
    assert prod.harness is not None
    await included(OpIntakeStore(prod.engine), prod.hashes, 90)
    async with prod.engine.connect() as db:
        # One snapshot: a charge committed between two reads would tip the balance.
        await db.execution_options(isolation_level="REPEATABLE READ")
        refs = (
            await db.execute(
                select(usage_events.c.reference).where(
                    usage_events.c.project_id == prod.project_id,
                    usage_events.c.idempotency_key.like(RELAY_KEYS),
                )
            )
        ).scalars()
        relayed = sorted(refs)
        charged = await db.scalar(
            select(func.coalesce(func.sum(usage_events.c.credits), 0)).where(
                usage_events.c.project_id == prod.project_id
            )
        )
        overage_events = await db.scalar(
            select(func.coalesce(func.sum(usage_events.c.overage), 0)).where(
                usage_events.c.project_id == prod.project_id
            )
        )
        from_lots = await db.scalar(
            select(func.coalesce(func.sum(credit_lots.c.amount - credit_lots.c.remaining), 0))
            .where(credit_lots.c.project_id == prod.project_id)
        )  # fmt: skip
        overage = await db.scalar(
            select(projects.c.cycle_overage).where(projects.c.project_id == prod.project_id)
        )
    assert relayed == sorted(prod.hashes)  # one relay charge per included op, none twice
    assert int(from_lots) + int(overage) == int(charged), (from_lots, overage, charged)
    assert int(overage) == int(overage_events)


async def send_raw(
    prod: Production, url: str, sent: list[str] | None = None
) -> tuple[int, dict[str, str], Any]:
    """One own-gas op through a replica: (status, headers, JSON answer or None). `sent`
    receives the op's hash, computed here, before the op is sent."""
    assert prod.harness is not None
    op = await own_gas_op(prod.harness)
    if sent is not None:
        sent.append(to_hex(user_op_hash(op, prod.entry_point, CHAIN_ID)))
    body = {
        "jsonrpc": "2.0", "id": 1, "method": "eth_sendUserOperation",
        "params": [user_operation_json(op), prod.entry_point],
    }  # fmt: skip
    async with httpx.AsyncClient(headers=prod.auth, timeout=15) as http:
        answer = await http.post(f"{url}/rpc/{CHAIN_ID}", json=body)
    try:
        parsed = answer.json()
    except ValueError:
        parsed = None
    return answer.status_code, dict(answer.headers), parsed


async def send(prod: Production) -> str:
    status, _, answer = await send_raw(prod, prod.next_url())
    assert status == 200 and "result" in answer, (status, answer)
    prod.hashes.append(answer["result"])
    return str(answer["result"])


# ---------------------------------------------------------------- the flows


async def test_the_quickstart_flow_debits_exactly_what_it_charged(production: Production) -> None:
    prod = production
    async with await prod.client() as client:
        wallet = await client.wallet(Harness.new_key())
        assert await wallet.is_deployed() is False
        before = await client.credits()
        alice, bob = Harness.new_key().address, Harness.new_key().address
        op = await wallet.send([{"to": alice, "data": b"gm"}, {"to": bob, "value": 0}])
        prod.hashes.append(op.user_op_hash)
        receipt = await op.wait(timeout=60)
        assert receipt.success is True
        assert await wallet.is_deployed() is True
        charged = await settled_charges(prod, op.user_op_hash)
    async with await prod.client() as other:  # the other replica reads the same ledger
        after = await other.credits()
        assert after.used_this_cycle - before.used_this_cycle == charged
        assert (await other.op_status(op.user_op_hash)).status == "included"
    await assert_ledger_invariants(prod)


async def settled_charges(prod: Production, user_op_hash: str) -> int:
    """The credits charged for one op, once the worker has settled its sponsorship."""
    deadline = time.monotonic() + 60
    while True:
        async with prod.engine.connect() as db:
            rows = (
                await db.execute(
                    select(usage_events.c.status, usage_events.c.credits).where(
                        usage_events.c.project_id == prod.project_id,
                        usage_events.c.reference == user_op_hash,
                    )
                )
            ).all()
        if rows and all(status != "held" for status, _ in rows):
            return sum(int(credits) for _, credits in rows)
        assert time.monotonic() < deadline, rows
        await asyncio.sleep(0.2)


async def test_a_sponsored_op_through_the_other_replica(production: Production) -> None:
    prod = production
    async with await prod.client() as client:
        wallet = await client.wallet(Harness.new_key())
        op = await wallet.send([{"to": Harness.new_key().address, "value": 0}])
        prod.hashes.append(op.user_op_hash)
        receipt = await op.wait(timeout=60)
        assert receipt.success is True
    assert await settled_charges(prod, op.user_op_hash) > 0
    await assert_ledger_invariants(prod)


async def test_a_notarization_is_anchored_by_a_worker_and_its_proof_verifies(
    production: Production,
) -> None:
    prod = production
    async with await prod.client() as client:
        notarization = await client.notarize_document(b"production path " + os.urandom(8))
    async with await prod.client() as client:  # the proof from the other replica
        proof = await (await client.notarization(notarization.id)).wait_for_proof(timeout=60)
        verified = await client.verify_proof(proof)
        assert verified.valid, verified
    await assert_ledger_invariants(prod)


async def create_endpoint(prod: Production, url: str) -> dict[str, Any]:
    async with httpx.AsyncClient(base_url=prod.next_url(), headers=prod.auth) as http:
        created = await http.post(
            "/v1/webhooks/endpoints", json={"url": url, "eventTypes": ["credits.low"]}
        )
    assert created.status_code == 201, created.text
    return dict(created.json())


async def queue_test_event(prod: Production, endpoint: dict[str, Any]) -> str:
    async with httpx.AsyncClient(base_url=prod.next_url(), headers=prod.auth) as http:
        queued = await http.post(f"/v1/webhooks/endpoints/{endpoint['id']}/test")
    assert queued.status_code == 202, queued.text
    return str(queued.json()["taskId"])


async def succeeded(prod: Production, task_id: str) -> Task:
    deadline = time.monotonic() + 30
    while True:
        task = await TaskQueue(prod.engine).find(task_id)
        assert task is not None
        if task.state.value == "succeeded":
            return task
        assert time.monotonic() < deadline, (task.state, task.error)
        await asyncio.sleep(0.2)


async def test_a_webhook_is_delivered_and_verifies(production: Production) -> None:
    prod = production
    endpoint = await create_endpoint(prod, prod.receiver.url)
    task_id = await queue_test_event(prod, endpoint)
    headers, body = await asyncio.wait_for(prod.receiver.received.get(), 30)
    event = verify_webhook(endpoint["secret"], headers, body)
    assert event["type"] == "webhook.test"
    assert (await succeeded(prod, task_id)).attempts == 1
    await assert_ledger_invariants(prod)


# ---------------------------------------------------------------- the drills


async def test_drill_a_worker_killed_mid_delivery_the_other_completes_it(
    production: Production,
) -> None:
    prod = production
    endpoint = await create_endpoint(prod, prod.receiver.url)
    prod.receiver.hang = True
    try:
        task_id = await queue_test_event(prod, endpoint)
        await asyncio.wait_for(prod.receiver.hung.wait(), 30)
        task = await TaskQueue(prod.engine).find(task_id)
        assert task is not None and task.lease_owner is not None
        pid = int(task.lease_owner.split(":")[1])
        victim = next(w for w in prod.workers if w.pid == pid)
        prod.receiver.hang = False
        victim.send_signal(signal.SIGKILL)
        await victim.wait()
    finally:
        prod.receiver.hang = False
    headers, body = await asyncio.wait_for(prod.receiver.received.get(), 10 * LEASE_SECONDS + 20)
    event = verify_webhook(endpoint["secret"], headers, body)
    assert event["type"] == "webhook.test"
    task = await succeeded(prod, task_id)
    assert task.attempts == 2 and task.lease_owner is None
    async with prod.engine.connect() as db:
        deliveries = await db.scalar(
            select(func.count()).where(
                usage_events.c.project_id == prod.project_id,
                usage_events.c.operation == "webhook_delivery",
            )
        )
    assert deliveries == 2  # the earlier webhook and this one: per delivery, not per attempt
    await assert_ledger_invariants(prod)


@pytest.mark.parametrize("held_down", [True, False], ids=["stop-start", "restart"])
async def test_drill_postgres_restarted_while_ops_are_sent(
    production: Production, held_down: bool
) -> None:
    """PostgreSQL restarted under a steady stream of ops through both replicas: once held
    down a few seconds (stop, then start), so that ops surely arrive while it is down, and
    once with `pg_ctlcluster ... restart` as an operator runs it."""
    prod = production
    answers: list[tuple[int, dict[str, str], Any]] = []
    sent: list[str] = []  # the hash of each op in `answers`, same order
    down_from = -1  # where the answers sent while the database is down begin
    enough = asyncio.Event()  # three of them

    async def keep_sending(stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                answers.append(await send_raw(prod, prod.next_url(), sent))
            except httpx.HTTPError as exc:
                answers.append((0, {}, repr(exc)))
            if 0 <= down_from <= len(answers) - 3:
                enough.set()
            await asyncio.sleep(0.05)

    stop = asyncio.Event()
    sender = asyncio.create_task(keep_sending(stop))
    during: list[tuple[int, dict[str, str], Any]] = []
    try:
        await asyncio.sleep(1.0)
        if held_down:
            await asyncio.to_thread(prod.cluster.ctl, "stop")
            down_from = len(answers)
            await asyncio.wait_for(enough.wait(), 20)
            during = answers[down_from:]
        else:
            await asyncio.to_thread(prod.cluster.ctl, "restart")
    finally:
        if not await prod.cluster.accepting():
            await asyncio.to_thread(prod.cluster.ctl, "start")
        await prod.cluster.accepts()
    after = len(answers)
    try:
        await asyncio.sleep(3.0)
    finally:
        stop.set()
        await sender
    assert all(status != 500 for status, _, _ in answers), [a for a in answers if a[0] != 200]
    if held_down:
        assert any(status == 503 for status, _, _ in during), during
    unsure: list[str] = []  # no hash returned: stored or not, the client cannot know
    for (status, headers, answer), user_op_hash_sent in zip(answers, sent, strict=True):
        if status == 503:
            assert int(headers["retry-after"]) >= 1, headers
            assert answer["error"]["code"] == -32603, answer  # JSON-RPC, never a problem
            unsure.append(user_op_hash_sent)
        elif status == 200 and "result" in answer:
            assert answer["result"] == user_op_hash_sent
            prod.hashes.append(answer["result"])
        elif status == 0:  # the connection broke before an answer
            unsure.append(user_op_hash_sent)
        else:
            assert status == 200 and answer["error"]["code"] != -32603, answer
    assert any(status == 200 for status, _, _ in answers[after:])
    # A leader stops when its lock's connection dies, for its supervisor to start again
    # (docs/deploy.md); a standby waits the outage out and leads. The test supervises.
    assert prod.restart_bundler is not None
    for i, proc in enumerate(prod.bundlers):
        if proc.returncode is not None:
            prod.bundlers[i] = await prod.restart_bundler()
            await standing_by(prod, prod.bundlers[i])
    assert sum(p.returncode is None for p in prod.bundlers) == 2
    assert any(w.returncode is None for w in prod.workers)  # a worker waits an outage out
    await send(prod)  # both replicas answer again
    await send(prod)
    # An op refused with 503 may still have been stored when the database went away as it
    # committed: then it is durable, is bundled and is charged once, as any other.
    intake = OpIntakeStore(prod.engine)
    for user_op_hash_sent in unsure:
        if await intake.get(CHAIN_ID, user_op_hash_sent) is not None:
            prod.hashes.append(user_op_hash_sent)
    await assert_ledger_invariants(prod)


async def standing_by(prod: Production, proc: asyncio.subprocess.Process) -> None:
    """Until a (re)started bundler has passed its checks and waits for the leader lock."""
    log = prod.logs / f"bundler-{proc.pid}.log"
    deadline = time.monotonic() + 60
    while "standing by for the bundler leader lock" not in log.read_text():
        assert proc.returncode is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        await asyncio.sleep(0.1)


async def test_drill_the_first_rpc_url_gone_sends_still_succeed(production: Production) -> None:
    prod = production
    await send(prod)
    await prod.proxy.stop()
    for _ in range(4):
        await send(prod)
    await assert_ledger_invariants(prod)
    failed_over = [
        log.name for log in prod.logs.glob("*.log")
        if "unreachable at endpoint #1" in log.read_text()  # the outage, logged once
    ]  # fmt: skip
    assert any(name.startswith("bundler-") for name in failed_over), failed_over


async def test_guesses_at_an_account_count_once_over_both_replicas(
    production: Production,
) -> None:
    """The sign-in throttles live in the shared Redis: five guesses at one account per 15
    minutes (the default) from one address, whichever replica each guess reaches."""
    email = f"guessed-{secrets.token_hex(4)}@example.com"
    answers = []
    for n in range(7):
        async with httpx.AsyncClient(base_url=prod_url(production, n), timeout=60) as http:
            form = await Form.of(http, "/dashboard/signin")
            answers.append(outcome(await sign_in(http, form, email, f"guess {n}")))
    assert answers == ["400 failed"] * 5 + ["429 too many"] * 2


def prod_url(prod: Production, n: int) -> str:
    return prod.api_urls[n % len(prod.api_urls)]


async def test_drill_redis_gone_the_replicas_serve_on_and_say_so(production: Production) -> None:
    """Redis stopped under both replicas: sends are still accepted (each replica counts its
    rate limits alone), /readyz stays 200 naming Redis degraded, each replica logs the
    outage once; once Redis is back, both count there again and say so."""
    prod = production
    await send(prod)
    operator = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    await prod.redis_proxy.stop()
    try:
        for _ in range(4):  # over both replicas in turn
            await send(prod)
        for url in prod.api_urls:
            async with httpx.AsyncClient(base_url=url) as http:
                ready = await http.get("/readyz", headers=operator)
            assert ready.status_code == 200, ready.text
            assert ready.json()["degraded"] == ["redis"], ready.text
    finally:
        await prod.redis_proxy.start()
    for url in prod.api_urls:
        await _until_not_degraded(url, operator)
    apis = [log.read_text() for log in prod.logs.glob("api-*.log")]
    assert len(apis) == 2
    assert all(text.count("Redis gave no answer") == 1 for text in apis), apis
    assert all("Redis answers again" in text for text in apis)
    await send(prod)
    await assert_ledger_invariants(prod)


async def _until_not_degraded(url: str, headers: dict[str, str], timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient(base_url=url) as http:
        while True:
            ready = await http.get("/readyz", headers=headers)
            if ready.status_code == 200 and "degraded" not in ready.json():
                return
            assert time.monotonic() < deadline, ready.text
            await asyncio.sleep(0.5)
