"""The operator endpoint of the processes that serve no API, as an operator scrapes it:
`entryway bundler --chain N --http-port P` (leader and standby of a chain bundled from the
intake, on PostgreSQL) and `entryway worker --config FILE --http-port P`, each a real
subprocess over a plain anvil with Entryway deployed.

The leader says it leads, the standby that it stands by; once the leader has bundled ops
its /metrics counts the bundles and the included ops; killed outright, the standby's
/readyz says it leads within seconds. The worker answers /healthz and reads the task queue
in its /metrics. Off this host, /metrics takes the metrics token."""

from __future__ import annotations

import asyncio
import re
import signal
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.domain.evm import to_hex
from entryway.domain.userop import user_op_hash
from entryway.storage.engine import make_engine, sqlite_url
from entryway.storage.intake import OpIntakeStore
from entryway.storage.secrets_key import SecretsKeySource
from entryway.storage.tasks import TaskQueue
from entryway.storage.webhooks import DELIVERY_TASK
from tests.integration.harness import Harness
from tests.integration.postgres import fresh_database
from tests.integration.test_bundler_failover import (
    TAKEOVER_S,
    harness_for,
    included,
    leading,
    own_gas_op,
    spawn,
    write_config,
)
from tests.integration.test_config_processes import (
    CHAIN_ID,
    ENTRYWAY,
    Deployed,
    _clean_environment,
    _free_port,
    _stop,
    _until_healthy,
    anvil_with_entryway,
    config,
    run,
)

TOKEN = "metrics-token-of-the-processes"
PROXIED = {"X-Forwarded-For": "203.0.113.9"}  # through a proxy on this host: not local


@pytest.fixture(scope="module")
async def deployed(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Deployed]:
    async with anvil_with_entryway(tmp_path_factory.mktemp("endpoints"), CHAIN_ID) as d:
        yield d


def sample(text: str, name: str, **labels: str) -> float:
    """The value of one series in a text exposition; AssertionError when it is absent."""
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    series = f"{name}{{{wanted}}}" if labels else name
    match = re.search(rf"^{re.escape(series)} (\S+)$", text, re.MULTILINE)
    assert match, f"{series} not in:\n{text}"
    return float(match.group(1))


async def role_within(url: str, role: str, within: float) -> dict[str, object]:
    """Until /readyz answers 200 with `role`; its body."""
    deadline = time.monotonic() + within
    body: object = None
    async with httpx.AsyncClient() as http:
        while time.monotonic() < deadline:
            try:
                answer = await http.get(f"{url}/readyz")
                body = answer.json()
                if answer.status_code == 200 and body["role"] == role:
                    return dict(body)
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.2)
    raise AssertionError(f"{url}/readyz never said {role}: {body}")


async def test_leader_and_standby_report_their_role_and_the_leaders_bundles(
    deployed: Deployed,
) -> None:
    async with fresh_database("bundler operator endpoint") as (database, _):
        path = write_config(deployed, "endpoint-bundler", database, executors=True)
        path.write_text(f'metrics_token = "{TOKEN}"\n' + path.read_text())
        code, out = await run("migrate", "--config", str(path))
        assert code == 0, out
        ports = _free_port(), _free_port()
        urls = [f"http://127.0.0.1:{p}" for p in ports]
        chain = ("bundler", "--config", str(path), "--chain", str(CHAIN_ID))
        procs = []
        engine = make_engine(database)
        try:
            first = await spawn(*chain, "--http-port", str(ports[0]))
            procs.append(first)
            await leading(first, 60)
            standby = await spawn(*chain, "--http-port", str(ports[1]))
            procs.append(standby)
            led = await role_within(urls[0], "leader", 10)
            assert led["chain"] == CHAIN_ID
            checks = led["checks"]
            assert isinstance(checks, dict)
            assert set(checks) == {
                "database",
                f"chain.{CHAIN_ID}.rpc",
                f"chain.{CHAIN_ID}.executors",
            }
            await role_within(urls[1], "standby", 30)

            async with JsonRpcClient(deployed.rpc_url) as rpc:
                harness = harness_for(deployed, EthClient(rpc))
                intake = OpIntakeStore(engine)
                hashes = []
                for _ in range(2):
                    op = await own_gas_op(harness)
                    digest = to_hex(user_op_hash(op, harness.deployment.entry_point, CHAIN_ID))
                    await intake.add(
                        chain_id=CHAIN_ID,
                        user_op_hash=digest,
                        entry_point=harness.deployment.entry_point,
                        op=op,
                    )
                    hashes.append(digest)
                await included(intake, hashes, 60)

            async with httpx.AsyncClient() as http:
                leader_metrics = (await http.get(f"{urls[0]}/metrics")).text
                standby_metrics = (await http.get(f"{urls[1]}/metrics")).text
                chain_label = {"chain": str(CHAIN_ID)}
                assert sample(leader_metrics, "entryway_bundler_leader", **chain_label) == 1
                assert sample(leader_metrics, "entryway_bundles_sent_total", **chain_label) >= 1
                assert (
                    sample(
                        leader_metrics,
                        "entryway_userops_included_total",
                        chain=str(CHAIN_ID),
                        outcome="succeeded",
                    )
                    == 2
                )
                assert sample(leader_metrics, "entryway_bundle_gas_used_total", **chain_label) > 0
                assert sample(leader_metrics, "entryway_mempool_ops", **chain_label) == 0
                assert (
                    sample(leader_metrics, "entryway_node_rpc_failures_total", **chain_label) == 0
                )
                assert sample(standby_metrics, "entryway_bundler_leader", **chain_label) == 0
                assert "entryway_bundles_sent_total{" not in standby_metrics  # it bundles nothing

                # Off this host, /metrics takes the metrics token; /healthz and /readyz do not.
                refused = await http.get(f"{urls[1]}/metrics", headers=PROXIED)
                assert refused.status_code == 401
                assert refused.json()["code"] == "metrics_token_required"
                wrong = {**PROXIED, "Authorization": "Bearer not-it"}
                assert (await http.get(f"{urls[1]}/metrics", headers=wrong)).status_code == 401
                opened = {**PROXIED, "Authorization": f"Bearer {TOKEN}"}
                assert (await http.get(f"{urls[1]}/metrics", headers=opened)).status_code == 200
                assert (await http.get(f"{urls[1]}/healthz", headers=PROXIED)).json() == {
                    "status": "ok",
                    "role": "standby",
                    "chain": CHAIN_ID,
                }

            # The leader killed outright: the standby's /readyz says it leads, within seconds.
            first.send_signal(signal.SIGKILL)
            killed_at = time.monotonic()
            await role_within(urls[1], "leader", TAKEOVER_S)
            assert time.monotonic() - killed_at < TAKEOVER_S
            async with httpx.AsyncClient() as http:
                now_leading = (await http.get(f"{urls[1]}/metrics")).text
            assert sample(now_leading, "entryway_bundler_leader", **chain_label) == 1
        finally:
            for proc in procs:
                if proc.returncode is None:
                    proc.send_signal(signal.SIGKILL)
                    await proc.wait()
            await engine.dispose()


OPERATOR = "operator-token-of-the-bundler-processes"


async def test_the_bundler_watches_its_executors_and_the_leader_tops_one_up(
    deployed: Deployed,
) -> None:
    """An executor drained under the floor: the bundler's /readyz fails naming it and its
    balance, its gauge shows it; given a funding key, the leader tops it up and is ready."""
    floor, top_up = 10**17, 5 * 10**17
    executor, funder = Harness.new_key(), Harness.new_key()
    async with JsonRpcClient(deployed.rpc_url) as rpc:
        eth = EthClient(rpc)
        await eth.rpc.request("anvil_setBalance", [executor.address, hex(floor // 10)])
        await eth.rpc.request("anvil_setBalance", [funder.address, hex(10**19)])
        (deployed.root / "drained.key").write_text(executor.key.hex() + "\n")
        (deployed.root / "funding.key").write_text(funder.key.hex() + "\n")
        async with fresh_database("executor watch") as (database, _):
            plain = write_config(deployed, "watch-bundler", database, executors=True)
            text = plain.read_text().replace(
                str(deployed.keys / "executor.key"), str(deployed.root / "drained.key")
            )
            text = f'admin_token = "{OPERATOR}"\n' + text + f"executor_min_balance_wei = {floor}\n"
            plain.write_text(text)
            funded = deployed.root / "watch-bundler-funded.toml"
            funded.write_text(
                text
                + f"executor_topup_wei = {top_up}\n"
                + f'executor_funding_key_file = "{deployed.root / "funding.key"}"\n'
            )
            code, out = await run("migrate", "--config", str(plain))
            assert code == 0, out
            port = _free_port()
            url = f"http://127.0.0.1:{port}"
            operator = {"Authorization": f"Bearer {OPERATOR}"}
            chain = ("bundler", "--chain", str(CHAIN_ID), "--http-port", str(port))

            proc = await spawn(*chain, "--config", str(plain))
            try:
                await leading(proc, 60)
                async with httpx.AsyncClient(base_url=url) as http:
                    for _ in range(100):  # until the leader's bundler has started
                        ready = await http.get("/readyz", headers=operator)
                        if ready.json()["checks"][f"chain.{CHAIN_ID}.rpc"]["ok"]:
                            break
                        await asyncio.sleep(0.2)
                    assert ready.status_code == 503, ready.text
                    assert ready.json()["failing"] == [f"chain.{CHAIN_ID}.executors"]
                    detail = ready.json()["checks"][f"chain.{CHAIN_ID}.executors"]["detail"]
                    assert (
                        detail == f"under {floor} wei: {executor.address} holds {floor // 10} wei"
                    )
                    scraped = (await http.get("/metrics")).text
                labels = {"chain": str(CHAIN_ID), "executor": executor.address}
                assert sample(scraped, "entryway_executor_balance_wei", **labels) == floor // 10
                assert sample(scraped, "entryway_executor_topups_total", chain=str(CHAIN_ID)) == 0
            finally:
                await _stop(proc)
            assert await eth.get_balance(executor.address) == floor // 10  # no funding key

            proc = await spawn(*chain, "--config", str(funded))
            try:
                await leading(proc, 60)
                await role_within(url, "leader", 30)  # ready: topped up
                assert await eth.get_balance(executor.address) == floor // 10 + top_up
                assert await eth.get_nonce(funder.address, "latest") == 1  # one transfer
                async with httpx.AsyncClient(base_url=url) as http:
                    for _ in range(50):  # counted once the leader has read the transfer mined
                        scraped = (await http.get("/metrics")).text
                        topups = sample(
                            scraped, "entryway_executor_topups_total", chain=str(CHAIN_ID)
                        )
                        if topups:
                            break
                        await asyncio.sleep(0.1)
                assert topups == 1
            finally:
                await _stop(proc)


async def test_a_funding_key_that_is_an_executor_key_or_unreadable_stops_the_bundler(
    deployed: Deployed,
) -> None:
    path = write_config(deployed, "funding-bundler", "sqlite+aiosqlite:///unused", executors=True)
    plain = path.read_text()
    for funding, problem in (
        (deployed.keys / "executor.key", "the funding key is an executor key"),
        (deployed.root / "no-such.key", str(deployed.root / "no-such.key")),
    ):
        path.write_text(
            plain + f'executor_topup_wei = {10**18}\nexecutor_funding_key_file = "{funding}"\n'
        )
        code, out = await run("bundler", "--config", str(path), "--chain", str(CHAIN_ID))
        assert code == 2, out
        assert "chains[0].executor_funding_key_file: " in out and problem in out, out


async def test_the_worker_answers_health_and_reads_the_task_queue(deployed: Deployed) -> None:
    path = config(deployed, "endpoint-worker")
    path.write_text(f'metrics_token = "{TOKEN}"\n' + path.read_text())
    code, out = await run("migrate", "--config", str(path))
    assert code == 0, out
    data_dir = deployed.root / "data-endpoint-worker"
    SecretsKeySource().box(data_dir, create=True)  # as `entryway api` would have made it
    engine = make_engine(sqlite_url(data_dir))
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    try:
        later = datetime.now(UTC) + timedelta(hours=1)  # queued, not yet due
        await TaskQueue(engine).enqueue(DELIVERY_TASK, {}, project_id=None, run_at=later)
        proc = await asyncio.create_subprocess_exec(
            ENTRYWAY, "worker", "--config", str(path), "--http-port", str(port),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
            env=_clean_environment(),
        )  # fmt: skip
        try:
            await _until_healthy(proc, f"{url}/healthz")
            async with httpx.AsyncClient(base_url=url) as http:
                assert (await http.get("/healthz")).json() == {"status": "ok", "role": "worker"}
                ready = await http.get("/readyz")
                assert ready.status_code == 200, ready.text
                assert ready.json()["checks"] == {"database": {"ok": True}}
                scraped = (await http.get("/metrics")).text
                kind = {"kind": DELIVERY_TASK}
                assert sample(scraped, "entryway_tasks", **kind, state="queued") == 1
                assert sample(scraped, "entryway_task_oldest_age_seconds", **kind) == 0
                assert "# TYPE entryway_webhook_delivery_failures_total counter" in scraped
                assert "# TYPE entryway_credits_charged_total counter" in scraped
                refused = await http.get("/metrics", headers=PROXIED)
                assert refused.status_code == 401
        finally:
            await _stop(proc)
        assert proc.returncode == 0
    finally:
        await engine.dispose()


async def test_http_port_is_refused_where_it_is_not_served(
    deployed: Deployed, tmp_path: Path
) -> None:
    key_file = deployed.keys / "executor.key"
    code, out = await run(
        "bundler", "--rpc-url", deployed.rpc_url, "--executor-key-file", str(key_file),
        "--http-port", "0",
    )  # fmt: skip
    assert code == 2 and "--http-port is for a configured chain's leader (--chain N)" in out, out
    database = f"sqlite+aiosqlite:///{tmp_path / 'deliveries.sqlite'}"
    code, out = await run("worker", "--database-url", database, "--http-port", "0")
    assert code == 2 and "--http-port: serve it from a worker with chains" in out, out
