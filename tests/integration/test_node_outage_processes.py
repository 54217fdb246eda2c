"""A chain's node failing under `entryway api` processes on PostgreSQL, as the drill ran them:
a plain anvil this test starts (and later pauses and kills), `entryway deploy` onto it, and
the API either straight on anvil or behind a proxy that can fail every call but the network
check's `eth_chainId`.

Clients get 503 with Retry-After from the first failed call (never a 500), within the chain's
`rpc_timeout_s` when the node hangs, and the log holds one line for the outage and one for
its end, and no request failure."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import ClientError, ClientSession, web

from entryway.domain.apikeys import KeyEnvironment
from entryway.domain.plans import PlanName
from entryway.storage.engine import make_engine
from entryway.storage.store import Store
from tests.integration.postgres import fresh_database
from tests.integration.test_config_processes import (
    Deployed,
    _free_port,
    _stop,
    anvil_with_entryway,
    config,
    run,
    start_api,
)

pytestmark = pytest.mark.anvil

CHAIN_ID = 84532
RPC_TIMEOUT_S = 2  # the chains[].rpc_timeout_s the processes run with
# A hung node's 503 may take the deadline twice (the call that hangs, then the network
# check's probe) plus process and scheduling time on a loaded machine: 2 + 2 + 4 s.
HUNG_ANSWER_WITHIN_S = 8.0
ACCOUNT = "0x" + "22" * 20
UNKNOWN_OP = "0x" + "ab" * 32


class FailingNode:
    """An HTTP proxy to anvil. While `failing`, it answers the network check (eth_chainId)
    itself and every other call with a 502 page: the node fails after the check passed."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.failing = False
        self._runner: web.AppRunner | None = None
        self._http: ClientSession | None = None

    async def start(self) -> None:
        self._http = ClientSession()
        app = web.Application()
        app.router.add_post("/", self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._http is not None:
            await self._http.close()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if self.failing:
            call = await request.json()
            if isinstance(call, dict) and call.get("method") == "eth_chainId":
                return web.json_response(
                    {"jsonrpc": "2.0", "id": call["id"], "result": hex(CHAIN_ID)}
                )
            return web.Response(status=502, text="<html>bad gateway</html>")
        assert self._http is not None
        headers = {"content-type": "application/json"}
        try:
            async with self._http.post(self.upstream, data=body, headers=headers) as answer:
                content = await answer.read()
        except (ClientError, OSError):
            return web.Response(status=502, text="<html>upstream gone</html>")
        return web.Response(body=content, status=answer.status, headers=headers)


@dataclass
class Api:
    url: str
    key: str
    log: Path
    proc: asyncio.subprocess.Process

    def lines(self) -> list[str]:
        return self.log.read_text(errors="replace").splitlines()


@dataclass
class Outage:
    deployed: Deployed
    proxy: FailingNode
    direct: Api  # on anvil itself
    proxied: Api  # behind the proxy


async def _project_key(database_url: str) -> str:
    engine = make_engine(database_url)
    try:
        store = Store(engine)
        now = datetime.now(UTC)
        owner = await store.create_user(f"{now.timestamp()}@example.org", now)
        project = await store.create_project(owner, "p", PlanName.PRO, [CHAIN_ID], now)
        return (await store.issue_key(project, KeyEnvironment.TEST, [CHAIN_ID], now)).secret
    finally:
        await engine.dispose()


async def _api(d: Deployed, name: str, database_url: str, rpc_url: str) -> Api:
    extra = f"rpc_timeout_s = {RPC_TIMEOUT_S}"
    path = config(d, name, database_url=database_url, rpc_url=rpc_url, extra=extra)
    code, out = await run("migrate", "--config", str(path))
    assert code == 0, out
    port, log = _free_port(), d.root / f"{name}.log"
    with log.open("wb") as out_file:
        proc = await start_api(path, port, stderr=out_file.fileno())
    return Api(f"http://127.0.0.1:{port}", await _project_key(database_url), log, proc)


@pytest.fixture(scope="module")
async def outage(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Outage]:
    root = tmp_path_factory.mktemp("outage")
    async with (
        anvil_with_entryway(root, CHAIN_ID) as deployed,
        fresh_database("node outages under api processes") as (database_url, _),
    ):
        proxy = FailingNode(deployed.rpc_url)
        await proxy.start()
        direct = await _api(deployed, "direct", database_url, deployed.rpc_url)
        try:
            proxied = await _api(deployed, "proxied", database_url, proxy.url)
            try:
                yield Outage(deployed, proxy, direct, proxied)
            finally:
                await _stop(proxied.proc)
        finally:
            await _stop(direct.proc)
            await proxy.stop()


async def _chain_reads(http: httpx.AsyncClient, api: Api) -> dict[str, httpx.Response]:
    """One call of each route that reads the chain, by name."""
    auth = {"Authorization": f"Bearer {api.key}"}
    at = {"chainId": CHAIN_ID}
    receipt = {"jsonrpc": "2.0", "id": 9, "method": "eth_getUserOperationReceipt",
               "params": [UNKNOWN_OP]}  # fmt: skip
    return {
        "account-info": await http.get(
            f"{api.url}/account-info", params={**at, "address": ACCOUNT}, headers=auth
        ),
        "v1/account-info": await http.get(
            f"{api.url}/v1/account-info", params={**at, "address": ACCOUNT}, headers=auth
        ),
        "v1/wallets/address": await http.get(
            f"{api.url}/v1/wallets/address", params={**at, "owner": ACCOUNT}, headers=auth
        ),
        "rpc": await http.post(f"{api.url}/rpc/{CHAIN_ID}", json=receipt, headers=auth),
    }


def _assert_unavailable(name: str, answer: httpx.Response) -> None:
    assert answer.status_code == 503, (name, answer.status_code, answer.text)
    assert answer.headers.get("Retry-After", "").isdigit(), (name, answer.headers)
    body: dict[str, Any] = answer.json()
    if name == "rpc" and "error" in body:  # past the network check: a JSON-RPC error
        assert body["error"]["code"] == -32603, body
        assert "node" in body["error"]["message"], body
    else:  # the network check's problem, on /rpc too
        assert answer.headers["content-type"].startswith("application/problem+json")
        assert body["code"] == "network_connection_problem", body
    assert "127.0.0.1" not in answer.text and "Error(" not in answer.text, answer.text


def _request_failures(api: Api) -> list[str]:
    """Lines of requests answered 500, and of anything printed without the log's format."""
    return [
        line
        for line in api.lines()
        if ("request " in line and " failed" in line) or "Warning" in line or "Traceback" in line
    ]


async def test_every_chain_read_is_503_when_the_node_fails_past_the_network_check(
    outage: Outage,
) -> None:
    api = outage.proxied
    async with httpx.AsyncClient(timeout=30) as http:
        for name, answer in (await _chain_reads(http, api)).items():
            assert answer.status_code in (200, 404) or name == "rpc", (name, answer.text)
        outage.proxy.failing = True
        try:
            # Each route's first call past the (cached, passing) network check meets the
            # failing node; so do the calls after it.
            for _ in range(2):
                for name, answer in (await _chain_reads(http, api)).items():
                    _assert_unavailable(name, answer)
        finally:
            outage.proxy.failing = False
    assert _request_failures(api) == []


async def test_a_hung_node_is_answered_503_within_the_rpc_timeout_and_logged_once(
    outage: Outage,
) -> None:
    api, node = outage.direct, outage.deployed.node
    assert node is not None and node.pid is not None
    auth = {"Authorization": f"Bearer {api.key}"}
    info = {"chainId": CHAIN_ID, "address": ACCOUNT}
    async with httpx.AsyncClient(timeout=60) as http:
        primed = await http.get(f"{api.url}/account-info", params=info, headers=auth)
        assert primed.status_code == 200, primed.text
        os.kill(node.pid, signal.SIGSTOP)
        try:
            for _ in range(3):
                started = time.monotonic()
                answer = await http.get(f"{api.url}/account-info", params=info, headers=auth)
                took = time.monotonic() - started
                _assert_unavailable("account-info", answer)
                assert took < HUNG_ANSWER_WITHIN_S, took
        finally:
            os.kill(node.pid, signal.SIGCONT)
        for _ in range(100):
            back = await http.get(f"{api.url}/account-info", params=info, headers=auth)
            if back.status_code == 200:
                break
            await asyncio.sleep(0.2)
        assert back.status_code == 200, back.text
    lines = api.lines()
    down = [line for line in lines if "unreachable at endpoint #1" in line]
    up = [line for line in lines if "reachable again" in line]
    assert len(down) == 1 and f"chain {CHAIN_ID}" in down[0], lines
    assert len(up) == 1 and f"chain {CHAIN_ID}" in up[0], lines
    assert _request_failures(api) == []


async def test_a_killed_node_is_answered_503_from_the_first_call(outage: Outage) -> None:
    """Last in this module: the node does not come back."""
    api, node = outage.direct, outage.deployed.node
    assert node is not None and node.pid is not None
    auth = {"Authorization": f"Bearer {api.key}"}
    info = {"chainId": CHAIN_ID, "address": ACCOUNT}
    async with httpx.AsyncClient(timeout=30) as http:
        for _ in range(100):  # the network check passes, and is kept a few seconds
            primed = await http.get(f"{api.url}/account-info", params=info, headers=auth)
            if primed.status_code == 200:
                break
            await asyncio.sleep(0.2)
        assert primed.status_code == 200, primed.text
        os.kill(node.pid, signal.SIGKILL)
        await node.exited()
        for _ in range(3):
            answer = await http.get(f"{api.url}/account-info", params=info, headers=auth)
            _assert_unavailable("account-info", answer)
        for name, answer in (await _chain_reads(http, api)).items():
            _assert_unavailable(name, answer)
    assert _request_failures(api) == []
