"""What the production processes show an operator, as real subprocesses on PostgreSQL over a
plain anvil with Entryway deployed: an `entryway api` and an `entryway worker` in front of a
chain bundled from the intake export no bundling series (their bundler only validates; the
leader bundles), only their node client's; and `entryway worker --help` lists the options
the README gives."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from entryway.storage.secrets_key import SecretsKeySource
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


async def test_api_and_worker_of_an_intake_chain_export_no_bundling_series(
    deployed: Deployed,
) -> None:
    async with fresh_database("metrics of intake processes") as (database_url, _):
        path = write_config(deployed, "intake-metrics", database_url, executors=False)
        code, out = await run("migrate", "--config", str(path))
        assert code == 0, out
        (deployed.root / "data").mkdir(exist_ok=True)
        SecretsKeySource().box(deployed.root / "data", create=True)  # as the API makes it
        api_port, worker_port = _free_port(), _free_port()
        api = await start_api(path, api_port)
        worker = await asyncio.create_subprocess_exec(
            ENTRYWAY, "worker", "--config", str(path), "--http-port", str(worker_port),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
            env=_clean_environment(),
        )  # fmt: skip
        try:
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
