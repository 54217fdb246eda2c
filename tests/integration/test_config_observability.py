"""`entryway api --config FILE` serving what the file says about observability: its
`metrics_token` opens /metrics to a scraper that does not look local (docs/operations.md)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.integration.test_config_processes import (
    CHAIN_ID,
    Deployed,
    _free_port,
    _stop,
    anvil_with_entryway,
    config,
    run,
    start_api,
)

TOKEN = "metrics-token-from-the-file"


@pytest.fixture(scope="module")
async def deployed(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Deployed]:
    async with anvil_with_entryway(tmp_path_factory.mktemp("observed"), CHAIN_ID) as d:
        yield d


async def test_the_files_metrics_token_opens_metrics_to_other_hosts(deployed: Deployed) -> None:
    path = config(deployed, "metrics")
    path.write_text(f'metrics_token = "{TOKEN}"\n' + path.read_text())  # a top-level key
    code, out = await run("migrate", "--config", str(path))
    assert code == 0, out
    port = _free_port()
    proc = await start_api(path, port, stderr=asyncio.subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}"
        # Through a reverse proxy on this host, a request comes from loopback but names
        # its real client: it does not count as local.
        proxied = {"X-Forwarded-For": "203.0.113.9"}
        async with httpx.AsyncClient(base_url=url) as http:
            refused = await http.get("/metrics", headers=proxied)
            assert refused.status_code == 401, refused.text
            assert refused.json()["code"] == "metrics_token_required"
            wrong = await http.get(
                "/metrics", headers={**proxied, "Authorization": "Bearer not-it"}
            )
            assert wrong.status_code == 401
            scraped = await http.get(
                "/metrics", headers={**proxied, "Authorization": f"Bearer {TOKEN}"}
            )
            assert scraped.status_code == 200, scraped.text
            # The API's own series (an API replica bundles nothing: no mempool series).
            assert f'entryway_node_rpc_failures_total{{chain="{CHAIN_ID}"}}' in scraped.text
    finally:
        await _stop(proc)
    assert proc.stderr is not None
    logged = (await proc.stderr.read()).decode()
    assert TOKEN not in logged
