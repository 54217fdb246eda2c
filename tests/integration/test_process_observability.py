"""What the production processes show an operator, as real subprocesses on PostgreSQL over a
plain anvil with Entryway deployed: an `entryway api` and an `entryway worker` in front of a
chain bundled from the intake export no bundling series (their bundler only validates; the
leader bundles), only their node client's; and `entryway worker --help` lists the options
the README gives."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from entryway.bundler.rpc_types import user_operation_json
from entryway.domain.plans import PlanName
from entryway.domain.pricebook import OperationType, Quote
from entryway.domain.userop import UserOperation
from entryway.paymaster.costs import sponsorship_key
from entryway.paymaster.settlement import SETTLE_TASK
from entryway.storage.engine import make_engine
from entryway.storage.secrets_key import SecretsKeySource
from entryway.storage.store import Store
from entryway.storage.tasks import TaskQueue
from tests.integration.postgres import fresh_database
from tests.integration.test_bundler_failover import write_config
from tests.integration.test_config_processes import (
    CHAIN_ID,
    ENTRYWAY,
    Deployed,
    _clean_environment,
    _free_port,
    _stop,
    _until_healthy,
    anvil_with_entryway,
    run,
    start_api,
)

pytestmark = pytest.mark.anvil

README = Path(__file__).resolve().parents[2] / "README.md"
BUNDLING_SERIES = (
    "entryway_mempool_ops",
    "entryway_bundles_sent_total",
    "entryway_bundle_gas_used_total",
    "entryway_userops_included_total",
    "entryway_userops_dropped_total",
)


@pytest.fixture(scope="module")
async def deployed(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Deployed]:
    async with anvil_with_entryway(tmp_path_factory.mktemp("observability"), CHAIN_ID) as d:
        yield d


async def _waiting_settlement(database_url: str) -> str:
    """A sponsorship settlement task whose op was never sent and is still valid: the worker
    polls it (a retry every few seconds) until the op is mined or expires."""
    engine = make_engine(database_url)
    try:
        store = Store(engine)
        now = datetime.now(UTC)
        owner = await store.create_user(f"{now.timestamp()}@example.org", now)
        project = await store.create_project(owner, "s", PlanName.FREE, [CHAIN_ID], now)
        op = UserOperation(
            sender="0x" + "11" * 20, nonce=1, call_data=b"", call_gas_limit=1,
            verification_gas_limit=1, pre_verification_gas=1, max_fee_per_gas=1,
            max_priority_fee_per_gas=1, signature=b"",
        )  # fmt: skip
        quote = Quote.of(OperationType.SPONSORED_USER_OPERATION, sponsorship=100)
        await store.ledger.hold(
            project, sponsorship_key(CHAIN_ID, op), quote, now, chain_id=CHAIN_ID
        )
        payload = {
            "projectId": project,
            "chainId": CHAIN_ID,
            "userOpHash": "0x" + "cd" * 32,
            "op": user_operation_json(op),
            "validUntil": int(time.time()) + 3600,
        }
        return await TaskQueue(engine).enqueue(SETTLE_TASK, payload, project_id=None)
    finally:
        await engine.dispose()


async def _attempts(database_url: str, task_id: str) -> int:
    engine = make_engine(database_url)
    try:
        task = await TaskQueue(engine).find(task_id)
        return 0 if task is None else task.attempts
    finally:
        await engine.dispose()


async def test_api_and_worker_of_an_intake_chain_export_no_bundling_series(
    deployed: Deployed,
) -> None:
    """And the worker's retries of a settlement waiting for its op log no error."""
    async with fresh_database("metrics of intake processes") as (database_url, _):
        path = write_config(deployed, "intake-metrics", database_url, executors=False)
        code, out = await run("migrate", "--config", str(path))
        assert code == 0, out
        (deployed.root / "data").mkdir(exist_ok=True)
        SecretsKeySource().box(deployed.root / "data", create=True)  # as the API makes it
        settle = await _waiting_settlement(database_url)
        api_port, worker_port = _free_port(), _free_port()
        api = await start_api(path, api_port)
        worker_log = deployed.root / "intake-worker.log"
        with worker_log.open("wb") as out_file:
            worker = await asyncio.create_subprocess_exec(
                ENTRYWAY, "worker", "--config", str(path), "--http-port", str(worker_port),
                "--poll-interval", "0.2", stdout=out_file, stderr=out_file,
                env=_clean_environment(),
            )  # fmt: skip
        try:
            for _ in range(300):  # SETTLE_POLL_SECONDS apart
                if await _attempts(database_url, settle) >= 3:
                    break
                await asyncio.sleep(0.2)
            assert await _attempts(database_url, settle) >= 3
            await _until_healthy(worker, f"http://127.0.0.1:{worker_port}/healthz")
            async with httpx.AsyncClient() as http:
                for port in (api_port, worker_port):
                    scraped = await http.get(f"http://127.0.0.1:{port}/metrics")
                    assert scraped.status_code == 200, scraped.text
                    text = scraped.text
                    for name in BUNDLING_SERIES:
                        assert not re.search(rf"^{name}\b", text, re.MULTILINE), (port, name)
                    # The node client it reads the chain through is still counted.
                    node = f'entryway_node_rpc_failures_total{{chain="{CHAIN_ID}"}}'
                    assert node in text, (port, text)
        finally:
            await _stop(worker)
            await _stop(api)
        logged = worker_log.read_text()
        assert "sponsorship.settle" in logged  # the worker runs the kind
        assert '"level": "error"' not in logged and "Traceback" not in logged, logged


def _readme_worker_options() -> set[str]:
    rows = [line for line in README.read_text().splitlines() if "`entryway worker" in line]
    assert rows, "the README's command table has no `entryway worker` row"
    return {option for row in rows for option in re.findall(r"--[a-z][a-z-]+", row)}


async def test_worker_help_lists_the_options_the_readme_gives() -> None:
    code, out = await run("worker", "--help", env={"COLUMNS": "200"})
    assert code == 0, out
    listed = set(re.findall(r"--[a-z][a-z-]+", out))
    wanted = _readme_worker_options() - {"--no-worker"}  # `entryway up`'s, named in passing
    assert {"--config", "--concurrency", "--http-port"} <= wanted  # the README was read
    assert wanted <= listed, sorted(wanted - listed)
