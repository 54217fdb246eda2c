"""Production processes from a config file, as an operator runs them: a plain anvil this test
starts as Base Sepolia (84532), `entryway deploy` onto it, then `entryway config check`,
`entryway migrate`, `entryway api` and `entryway worker`, each a real subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from entryway.bundler.rpc_types import user_operation_json
from entryway.devnet.anvil import AnvilConfig, AnvilProcess
from entryway.domain.apikeys import KeyEnvironment
from entryway.domain.plans import PlanName
from entryway.domain.pricebook import OperationType, Quote
from entryway.domain.userop import UserOperation
from entryway.paymaster.costs import sponsorship_key
from entryway.paymaster.settlement import SETTLE_TASK
from entryway.storage.engine import make_engine, sqlite_url
from entryway.storage.store import Store
from entryway.storage.tasks import TaskQueue
from tests.integration.harness import Harness

ENTRYWAY = str(Path(sys.executable).with_name("entryway"))
CHAIN_ID = 84532
ADMIN_TOKEN = "operator-token-never-shown"


@dataclass(frozen=True)
class Deployed:
    rpc_url: str
    root: Path
    keys: Path
    node: AnvilProcess | None = None  # to stop or pause the node under the processes


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        ENTRYWAY, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        env={**_clean_environment(), **(env or {})},
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), 180)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


def _clean_environment() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("ENTRYWAY_") or k == "ENTRYWAY_ANVIL"
    }


@asynccontextmanager
async def anvil_with_entryway(root: Path, chain_id: int) -> AsyncIterator[Deployed]:
    """Plain anvil as `chain_id`, with Entryway deployed onto it by `entryway deploy`."""
    keys = root / "keys"
    keys.mkdir()
    node = AnvilProcess(AnvilConfig(chain_id=chain_id))
    await node.start()
    try:
        operator, signer, notary, executor = (Harness.new_key() for _ in range(4))
        async with httpx.AsyncClient() as http:
            for account in (operator, notary, executor):
                await http.post(node.rpc_url, json={
                    "jsonrpc": "2.0", "id": 1, "method": "anvil_setBalance",
                    "params": [account.address, hex(10**21)],
                })  # fmt: skip
        for name, account in (
            ("operator", operator), ("signer", signer), ("notary", notary), ("executor", executor)
        ):  # fmt: skip
            (keys / f"{name}.key").write_text(account.key.hex() + "\n")
        code, out = await run(
            "deploy", "--rpc-url", node.rpc_url, "--key-file", str(keys / "operator.key"),
            "--chain-id", str(chain_id), "--paymaster-signer", signer.address,
            "--notary-submitter", notary.address, "--paymaster-deposit-wei", str(10**18),
            "--paymaster-stake-wei", str(10**17),
        )  # fmt: skip
        assert code == 0, out
        (keys / "owner").write_text(operator.address)
        yield Deployed(node.rpc_url, root, keys, node)
    finally:
        await node.stop()


@pytest.fixture(scope="module")
async def deployed(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Deployed]:
    async with anvil_with_entryway(tmp_path_factory.mktemp("production"), CHAIN_ID) as d:
        yield d


def config(d: Deployed, name: str, *, chain_id: int = CHAIN_ID, rpc_url: str | None = None,
           notary_key: Path | None = None, database_url: str | None = None,
           extra: str = "") -> Path:  # fmt: skip
    data_dir = d.root / f"data-{name}"
    lines = [f'data_dir = "{data_dir}"']
    if database_url:
        lines.append(f'database_url = "{database_url}"')
    lines += [
        "[[chains]]",
        f"chain_id = {chain_id}",
        f'rpc_urls = ["{rpc_url or d.rpc_url}"]',
        f'executor_key_files = ["{d.keys / "executor.key"}"]',
        f'paymaster_signer_key_file = "{d.keys / "signer.key"}"',
        f'notary_submitter_key_file = "{notary_key or d.keys / "notary.key"}"',
        f'deploy_owner = "{(d.keys / "owner").read_text()}"',
        extra,
    ]
    path = d.root / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


async def project_key(data_dir: Path, email: str, chain_id: int) -> str:
    """An admin key of a new FREE project on `chain_id`, written to the config's SQLite."""
    engine = make_engine(sqlite_url(data_dir))
    try:
        store = Store(engine)
        now = datetime.now(UTC)
        owner = await store.create_user(email, now)
        project = await store.create_project(owner, "p", PlanName.FREE, [chain_id], now)
        return (await store.issue_key(project, KeyEnvironment.TEST, [chain_id], now)).secret
    finally:
        await engine.dispose()


async def start_api(
    path: Path, port: int, *, stderr: int | None = None
) -> asyncio.subprocess.Process:
    """`entryway api --config path` on `port`, healthy before it is returned."""
    proc = await asyncio.create_subprocess_exec(
        ENTRYWAY, "api", "--config", str(path), "--port", str(port),
        stdout=asyncio.subprocess.DEVNULL, stderr=stderr or asyncio.subprocess.DEVNULL,
        env=_clean_environment(),
    )  # fmt: skip
    await _until_healthy(proc, f"http://127.0.0.1:{port}/healthz")
    return proc


async def test_config_check_passes_and_shows_no_secret(deployed: Deployed) -> None:
    path = config(deployed, "good")
    code, out = await run("config", "check", "--config", str(path),
                          env={"ENTRYWAY_ADMIN_TOKEN": ADMIN_TOKEN})  # fmt: skip
    assert code == 0, out
    assert f"chain      {CHAIN_ID} base-sepolia: {deployed.rpc_url}" in out
    assert "database   sqlite+aiosqlite:///" in out
    assert "schema     run `entryway migrate`" in out  # a fresh database, not a problem
    # What the node traces (anvil: the struct logger), and the mode that follows.
    assert f"validation {CHAIN_ID} #1: opcodes (every ERC-7562 rule enforced) [auto]" in out
    assert f"node       {CHAIN_ID} #1: state overrides on eth_call: yes" in out
    assert f"node       {CHAIN_ID} #1: eth_feeHistory: yes" in out
    assert out.strip().endswith("ok")
    assert ADMIN_TOKEN not in out
    for key in deployed.keys.glob("*.key"):
        assert key.read_text().strip().removeprefix("0x") not in out


async def test_a_wrong_chain_id_names_the_chain_and_masks_the_url(deployed: Deployed) -> None:
    port = deployed.rpc_url.rsplit(":", 1)[1]
    with_password = f"http://user:url-password@127.0.0.1:{port}"
    path = config(deployed, "wrong-chain", chain_id=80002, rpc_url=with_password)
    code, out = await run("config", "check", "--config", str(path))
    assert code == 2, out
    assert (
        f"chains[0].rpc_urls[0]: http://127.0.0.1:{port}/*** is chain {CHAIN_ID}, "
        "not chain 80002 (polygon-amoy)"
    ) in out
    assert "url-password" not in out


async def test_a_pinned_validation_mode_the_node_cannot_serve_is_named(
    deployed: Deployed,
) -> None:
    path = config(deployed, "native", extra='validation_mode = "native"')
    code, out = await run("config", "check", "--config", str(path))
    assert code == 2, out
    assert "chains[0].validation_mode: validation_mode native is pinned" in out
    assert "it serves opcodes at most" in out
    calls = config(deployed, "calls", extra='validation_mode = "calls"')
    code, out = await run("config", "check", "--config", str(calls))
    assert code == 0, out
    assert f"validation {CHAIN_ID} #1: calls (not enforced: OP-012" in out
    assert "[pinned]" in out


async def test_a_missing_key_file_is_named(deployed: Deployed) -> None:
    path = config(deployed, "no-key", notary_key=deployed.keys / "missing.key")
    code, out = await run("config", "check", "--config", str(path))
    assert code == 2, out
    assert "chains[0].notary_submitter_key_file: cannot read key file" in out
    assert "missing.key" in out


async def test_an_unreachable_database_stops_every_process(deployed: Deployed) -> None:
    url = f"postgresql://entryway:db-password@127.0.0.1:{_free_port()}/entryway"
    path = config(deployed, "no-db", database_url=url)
    for command in (("config", "check"), ("api",), ("worker",), ("migrate",)):
        code, out = await run(*command, "--config", str(path))
        assert code == 2, (command, out)
        assert "database_url: cannot reach postgresql://entryway:***@127.0.0.1:" in out, command
        assert "db-password" not in out


async def test_a_bad_file_exits_2_naming_the_key(deployed: Deployed) -> None:
    path = deployed.root / "bad.toml"
    path.write_text('[[chains]]\nchain_id = 84532\nrpc_urls = []\nbundling = "in_process"\n')
    code, out = await run("api", "--config", str(path))
    assert code == 2
    assert "chains[0].rpc_urls: " in out  # every problem, each naming its key
    assert "chains[0].bundling: " in out


async def _until_healthy(proc: asyncio.subprocess.Process, url: str) -> None:
    async with httpx.AsyncClient() as http:
        for _ in range(600):
            try:
                if (await http.get(url)).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            assert proc.returncode is None, "the process exited"
            await asyncio.sleep(0.1)
    raise AssertionError(f"{url} never answered")


async def _stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.send_signal(signal.SIGINT)
        await asyncio.wait_for(proc.wait(), 30)


async def test_migrate_then_api_serves_from_the_config(deployed: Deployed) -> None:
    path = config(deployed, "api")
    code, out = await run("api", "--config", str(path))  # before `migrate`
    assert code == 2, out
    assert "run `entryway migrate` first" in out
    for _ in range(2):  # idempotent
        code, out = await run("migrate", "--config", str(path))
        assert code == 0, out
        assert "schema up to date" in out
    key = await project_key(deployed.root / "data-api", "ops@example.com", CHAIN_ID)
    port = _free_port()
    proc = await start_api(path, port)
    try:
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as http:
            answer = await http.get(
                f"http://127.0.0.1:{port}/get-sdk-defaults", params={"chainId": CHAIN_ID}
            )
            assert answer.status_code == 200, answer.text
            body = answer.text
            assert str(CHAIN_ID) in body
            rpc = await http.post(
                f"http://127.0.0.1:{port}/rpc/{CHAIN_ID}",
                json={"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []},
            )
            assert rpc.json()["result"] == hex(CHAIN_ID)
    finally:
        await _stop(proc)


async def test_worker_runs_the_settlement_task_kind(deployed: Deployed) -> None:
    path = config(deployed, "worker")
    code, out = await run("migrate", "--config", str(path))
    assert code == 0, out
    engine = make_engine(sqlite_url(deployed.root / "data-worker"))
    # The worker opens webhook secrets with the data directory's key, which a serving
    # process makes; here the test makes it, as `entryway api` would have.
    from entryway.storage.secrets_key import SecretsKeySource

    SecretsKeySource().box(deployed.root / "data-worker", create=True)
    op = UserOperation(
        sender="0x1111111111111111111111111111111111111111", nonce=1, call_data=b"",
        call_gas_limit=1, verification_gas_limit=1, pre_verification_gas=1,
        max_fee_per_gas=1, max_priority_fee_per_gas=1, signature=b"",
    )  # fmt: skip
    now = datetime.now(UTC)
    store = Store(engine)
    project = await store.create_project(
        await store.create_user("w@example.com", now), "w", PlanName.FREE, [CHAIN_ID], now
    )
    # The hold the paymaster placed when it signed: the settlement task's to release, the op
    # having expired unsent.
    quote = Quote.of(OperationType.SPONSORED_USER_OPERATION, sponsorship=100)
    await store.ledger.hold(project, sponsorship_key(CHAIN_ID, op), quote, now, chain_id=CHAIN_ID)
    payload = {
        "projectId": project,
        "chainId": CHAIN_ID,
        "userOpHash": "0x" + "ab" * 32,
        "op": user_operation_json(op),
        "validUntil": int(time.time()) - 3600,  # long expired, never sent: released
    }
    try:
        task_id = await TaskQueue(engine).enqueue(SETTLE_TASK, payload, project_id=None)
        proc = await asyncio.create_subprocess_exec(
            ENTRYWAY, "worker", "--config", str(path), "--poll-interval", "0.2",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            env=_clean_environment(),
        )  # fmt: skip
        try:
            task = None
            for _ in range(300):
                task = await TaskQueue(engine).find(task_id)
                if task is not None and task.attempts >= 1 and task.lease_owner is None:
                    break
                assert proc.returncode is None, "the worker exited"
                await asyncio.sleep(0.2)
            assert task is not None and task.attempts >= 1, "the worker never claimed the task"
            assert "no handler" not in (task.error or "")
            assert task.state.value == "succeeded", (task.state, task.error)
            assert task.result == {"settled": payload["userOpHash"]}
        finally:
            await _stop(proc)
        assert proc.stdout is not None
        logged = (await proc.stdout.read()).decode()
        for kind in ("webhook.deliver", "notary.anchor", "sponsorship.settle"):
            assert kind in logged, logged  # every task kind has its handler here
        assert "wallet.recovery.start" in logged and "wallet.recovery.finalize" in logged
    finally:
        await engine.dispose()


async def test_up_takes_its_settings_from_the_file_and_shows_both_demo_keys(
    tmp_path: Path,
) -> None:
    port = _free_port()
    path = tmp_path / "up.toml"
    path.write_text(
        f'data_dir = "{tmp_path / "data"}"\n[http]\nport = {port}\n[limits]\nmax_rpc_batch = 2\n'
    )
    proc = await asyncio.create_subprocess_exec(
        ENTRYWAY, "up", "--config", str(path), "--base-port", "0", "--chains", "84532",
        "--no-worker", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        env=_clean_environment(),
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        banner: dict[str, str] = {}
        while "Service" not in banner:
            line = (await asyncio.wait_for(proc.stdout.readline(), 120)).decode()
            assert line, "entryway up exited before its banner"
            name, _, rest = line.partition(" ")
            banner.setdefault(name, "")
            banner[name] += rest.strip() + "\n"
        demo = json.loads((tmp_path / "data" / "demo.json").read_text())
        assert f"http://127.0.0.1:{port}" in banner["API"]
        assert demo["apiKey"] in banner["API"]  # "API key  ew_..." shares the first word
        assert banner["Service"].split()[0] == demo["serviceKey"]
        async with httpx.AsyncClient() as http:
            call = {"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}
            answer = await http.post(
                f"http://127.0.0.1:{port}/rpc/84532",
                params={"apikey": demo["serviceKey"]},
                json=[call, {**call, "id": 2}, {**call, "id": 3}],
            )
            refused = answer.json()
            assert isinstance(refused, dict) and "error" in refused  # the file's batch limit
    finally:
        await _stop(proc)


async def test_a_fifth_network_is_one_config_entry(tmp_path: Path) -> None:
    """A chain id no network has: described in its table, deployed by `entryway deploy`,
    then served like the four."""
    local = 31337
    async with anvil_with_entryway(tmp_path, local) as d:
        described = 'name = "local-l1"\nnative_token = "LOC"\ntestnet = true\n'
        described += 'explorer_url = "https://explorer.local.example"\n'
        path = config(d, "fifth", chain_id=local, extra=described)
        code, out = await run("migrate", "--config", str(path))
        assert code == 0, out
        key = await project_key(tmp_path / "data-fifth", "five@example.com", local)
        port = _free_port()
        proc = await start_api(path, port)
        try:
            async with httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}) as http:
                answer = await http.get(
                    f"http://127.0.0.1:{port}/get-sdk-defaults", params={"chainId": local}
                )
                assert answer.status_code == 200, answer.text
                body = answer.json()
                assert (body["network"], body["nativeToken"]) == ("local-l1", "LOC")
                assert body["explorer"] == "https://explorer.local.example"
        finally:
            await _stop(proc)


async def test_the_bundler_of_a_configured_chain_is_its_leader(deployed: Deployed) -> None:
    """`entryway bundler --config FILE --chain N` takes the chain's URLs, executor keys and
    EntryPoint from the settings and leads the chain's bundling from the intake (SQLite: the
    lease row), saying so on stdout."""
    path = config(deployed, "bundler")
    code, out = await run("bundler", "--config", str(path), "--chain", "80002")
    assert code == 2 and "chains: no chain 80002 in the settings" in out
    code, out = await run("migrate", "--config", str(path))
    assert code == 0, out
    proc = await asyncio.create_subprocess_exec(
        ENTRYWAY, "bundler", "--config", str(path), "--chain", str(CHAIN_ID),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
        env=_clean_environment(),
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert json.loads(line) == {"leading": CHAIN_ID}
    finally:
        await _stop(proc)


EDGE = "[http]\nmax_request_line_bytes = 1024\nmax_header_bytes = 2048\nheader_timeout_s = 1.0"


async def _raw(port: int, data: bytes) -> bytes:
    """What the server answers `data` with before it closes (b"" for a bare close)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        return await asyncio.wait_for(reader.read(65536), 15)
    finally:
        writer.close()
        await writer.wait_closed()


async def _held_to_the_http_table(port: int) -> None:
    long_line = await _raw(port, b"GET /" + b"a" * 1500 + b" HTTP/1.1\r\nHost: t\r\n\r\n")
    assert long_line.startswith(b"HTTP/1.1 414 "), long_line[:100]
    many = b"".join(b"X-P-%d: %s\r\n" % (i, b"p" * 100) for i in range(25))  # ~2.6 KiB
    assert (await _raw(port, b"GET / HTTP/1.1\r\n" + many)).startswith(b"HTTP/1.1 431 ")
    started = time.monotonic()
    stalled = await _raw(port, b"GET / HTTP/1.1\r\nHost: t\r\n")
    assert stalled.startswith(b"HTTP/1.1 408 "), stalled[:100]
    assert time.monotonic() - started < 10  # the file's 1 s, not the default 10 s


async def test_api_and_bundler_hold_connections_to_the_files_http_table(
    deployed: Deployed,
) -> None:
    path = config(deployed, "edge", extra=EDGE)
    code, out = await run("migrate", "--config", str(path))
    assert code == 0, out
    port = _free_port()
    proc = await start_api(path, port)
    try:
        await _held_to_the_http_table(port)
    finally:
        await _stop(proc)

    # The standalone bundler (its own mempool, JSON-RPC on --port) under the same file.
    port = _free_port()
    proc = await asyncio.create_subprocess_exec(
        ENTRYWAY, "bundler", "--config", str(path), "--rpc-url", deployed.rpc_url,
        "--executor-key-file", str(deployed.keys / "executor.key"),
        "--port", str(port), stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL, env=_clean_environment(),
    )  # fmt: skip
    try:
        await _until_healthy(proc, f"http://127.0.0.1:{port}/healthz")
        await _held_to_the_http_table(port)
    finally:
        await _stop(proc)


async def test_a_pinned_validation_mode_the_node_cannot_serve_stops_the_api(
    deployed: Deployed,
) -> None:
    path = config(deployed, "native-api", extra='validation_mode = "native"')
    code, out = await run("migrate", "--config", str(path))
    assert code == 0, out
    for process in (("api", "--port", str(_free_port())), ("bundler", "--chain", str(CHAIN_ID))):
        code, out = await run(*process, "--config", str(path))
        assert code == 2, (process, out)
        assert "chains[0].validation_mode: validation_mode native is pinned" in out, out
