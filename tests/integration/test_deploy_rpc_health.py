"""`entryway deploy` judges whether a network is active, with a stable RPC endpoint: the
head's age against the block time, and a window of probes (failures, latency)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from entryway.devnet.anvil import AnvilConfig, AnvilProcess, free_port
from tests.integration.harness import Harness
from tests.integration.test_deploy import run_cli

QUICK = ("--rpc-probes", "4", "--rpc-probe-interval", "0.1")


class FlakyRpc:
    """A real HTTP endpoint in front of anvil: every other eth_blockNumber answered with a
    503, and each answer held back `delay_s`; everything else passed through."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.fail_every_other = False
        self.delay_s = 0.0
        self.block_number_calls = 0
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        self._session = aiohttp.ClientSession()
        app = web.Application()
        app.router.add_post("/", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        if b'"eth_blockNumber"' in body:
            self.block_number_calls += 1
            await asyncio.sleep(self.delay_s)
            if self.fail_every_other and self.block_number_calls % 2 == 0:
                return web.Response(status=503, text="busy")
        assert self._session is not None
        async with self._session.post(
            self.upstream, data=body, headers={"content-type": "application/json"}
        ) as answer:
            return web.Response(body=await answer.read(), content_type="application/json")


@pytest.fixture
async def node() -> AsyncIterator[AnvilProcess]:
    anvil = AnvilProcess(AnvilConfig(chain_id=84532))
    await anvil.start()
    try:
        yield anvil
    finally:
        await anvil.stop()


@pytest.fixture
async def flaky(node: AnvilProcess) -> AsyncIterator[FlakyRpc]:
    proxy = FlakyRpc(node.rpc_url)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.stop()


def _key_file(tmp_path: Path) -> str:
    key_file = tmp_path / "operator.key"
    key_file.write_text(Harness.new_key().key.hex())
    return str(key_file)


def _check(lines: list[dict[str, object]], requirement: str) -> dict[str, object]:
    return next(line for line in lines if line.get("requirement") == requirement)


async def test_a_halted_chain_is_refused_for_its_stale_head(tmp_path: Path) -> None:
    hour_ago = int(time.time()) - 3600
    node = AnvilProcess(AnvilConfig(chain_id=84532, genesis_timestamp=hour_ago))
    await node.start()
    try:
        rpc = node.rpc_url
        code, lines, err = await run_cli(
            "deploy", "--rpc-url", rpc, "--key-file", _key_file(tmp_path), *QUICK
        )
        assert code == 1
        head = _check(lines, "chain active (fresh head)")
        assert head["ok"] is False
        detail = str(head["detail"])
        assert "latest block 0 is 36" in detail  # ~3600 s
        assert "block time 2 s, stale after 60 s (30 blocks)" in detail
        assert _check(lines, "RPC endpoint stable")["ok"] is True
        assert "network requirements not met: chain active (fresh head)" in err

        # A generous threshold takes the same head as fresh.
        code, lines, _ = await run_cli(
            "deploy", "--rpc-url", rpc, "--key-file", _key_file(tmp_path), *QUICK,
            "--max-head-age-blocks", "3600",
        )  # fmt: skip
        assert _check(lines, "chain active (fresh head)")["ok"] is True
    finally:
        await node.stop()


async def test_an_endpoint_failing_probes_is_unstable(flaky: FlakyRpc, tmp_path: Path) -> None:
    flaky.fail_every_other = True
    code, lines, err = await run_cli(
        "deploy", "--rpc-url", flaky.url, "--key-file", _key_file(tmp_path), *QUICK
    )
    assert code == 1
    stable = _check(lines, "RPC endpoint stable")
    assert stable["ok"] is False
    assert "2/4 probes answered" in str(stable["detail"])
    assert "failures 2 (limit 0)" in str(stable["detail"])
    assert "RPC endpoint stable" in err
    assert _check(lines, "chain active (fresh head)")["ok"] is True

    flaky.block_number_calls = 0
    _, lines, _ = await run_cli(
        "deploy", "--rpc-url", flaky.url, "--key-file", _key_file(tmp_path), *QUICK,
        "--rpc-max-failures", "2",
    )  # fmt: skip
    assert _check(lines, "RPC endpoint stable")["ok"] is True


async def test_a_slow_endpoint_is_unstable(flaky: FlakyRpc, tmp_path: Path) -> None:
    flaky.delay_s = 0.3
    code, lines, _ = await run_cli(
        "deploy", "--rpc-url", flaky.url, "--key-file", _key_file(tmp_path), *QUICK,
        "--rpc-max-latency-ms", "100",
    )  # fmt: skip
    assert code == 1
    stable = _check(lines, "RPC endpoint stable")
    assert stable["ok"] is False
    assert "4/4 probes answered" in str(stable["detail"])
    assert "(limit 100 ms)" in str(stable["detail"])
    assert flaky.block_number_calls >= 4  # each probe reached the endpoint


async def test_bad_thresholds_are_refused_before_any_probe(tmp_path: Path) -> None:
    code, lines, err = await run_cli(
        "deploy", "--rpc-url", "http://127.0.0.1:9", "--key-file", _key_file(tmp_path),
        "--rpc-probes", "0",
    )  # fmt: skip
    assert code == 2 and lines == []
    assert "at least one probe" in err
