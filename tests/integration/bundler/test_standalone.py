"""`entryway bundler` as its own process, over HTTP, as a standard client reaches it."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from entryway.devnet.anvil import free_port
from entryway.devnet.devnet import Devnet
from entryway.domain.entry_points import V06, V07, V09
from tests.integration.harness import ETHER, Harness

ENTRYWAY = str(Path(sys.executable).with_name("entryway"))
# A process start: imports, then the node probed (chain id, EntryPoints, tracers and what
# else it serves); seconds on a loaded two-core machine.
START_S = 30.0


@pytest.fixture
async def bundler_url(
    devnet: Devnet, harness: Harness, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[str]:
    """The bundler's URL; `request.param`, when a test gives one, is more command-line args."""
    extra: tuple[str, ...] = getattr(request, "param", ())
    key = Harness.new_key()
    await harness.fund(key.address, 10 * ETHER)
    key_file = tmp_path / "executors.key"
    key_file.write_text(key.key.hex() + "\n")
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        ENTRYWAY, "bundler", "--rpc-url", devnet.chains[0].rpc_url,
        "--executor-key-file", str(key_file), "--port", str(port), *extra,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = asyncio.get_running_loop().time() + START_S
        async with httpx.AsyncClient() as http:
            while True:
                try:
                    if (await http.get(f"{url}/healthz")).status_code == 200:
                        break
                except httpx.HTTPError:
                    await asyncio.sleep(0.1)
                assert asyncio.get_running_loop().time() < deadline, "the bundler did not come up"
        yield url
    finally:
        proc.terminate()
        assert await asyncio.wait_for(proc.wait(), 15) is not None


async def test_json_rpc_over_http(bundler_url: str, harness: Harness) -> None:
    async with httpx.AsyncClient() as http:
        one = await http.post(
            f"{bundler_url}/rpc", json={"jsonrpc": "2.0", "id": 1, "method": "eth_chainId"}
        )
        assert one.json() == {"jsonrpc": "2.0", "id": 1, "result": hex(harness.chain_id)}
        batch = await http.post(
            f"{bundler_url}/rpc",
            json=[
                {"jsonrpc": "2.0", "id": 1, "method": "eth_supportedEntryPoints", "params": []},
                {"jsonrpc": "2.0", "id": 2, "method": "debug_bundler_clearState", "params": []},
            ],
        )
        first, second = batch.json()
        # v0.8, then the v0.7, v0.9 and v0.6 EntryPoints the devnet also carries.
        assert first["result"] == [
            harness.deployment.entry_point,
            V07.address,
            V09.packaged_address,
            V06.address,
        ]
        assert second["error"]["code"] == -32601  # debug namespace off by default
        garbled = await http.post(f"{bundler_url}/rpc", content=b"{nope")
        assert garbled.json()["error"]["code"] == -32700
        health = await http.get(f"{bundler_url}/healthz")
        assert health.json() == {"status": "ok", "mempool": 0}


async def test_refuses_to_start_without_an_entry_point(tmp_path: Path) -> None:
    from entryway.devnet.anvil import AnvilConfig, AnvilProcess

    node = AnvilProcess(AnvilConfig(chain_id=1337))
    await node.start()
    try:
        key_file = tmp_path / "k"
        key_file.write_text(Harness.new_key().key.hex())
        proc = await asyncio.create_subprocess_exec(
            ENTRYWAY, "bundler", "--rpc-url", node.rpc_url, "--executor-key-file", str(key_file),
            "--port", str(free_port()),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        out, _ = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode != 0
        assert b"no EntryPoint at 0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108" in out
    finally:
        await node.stop()


@pytest.mark.parametrize(
    "bundler_url", [("--entry-point", V07.address)], indirect=True, ids=["v07-only"]
)
async def test_an_entry_point_named_is_served_alone(bundler_url: str) -> None:
    async with httpx.AsyncClient() as http:
        r = await http.post(
            f"{bundler_url}/rpc",
            json={"jsonrpc": "2.0", "id": 1, "method": "eth_supportedEntryPoints", "params": []},
        )
    assert r.json()["result"] == [V07.address]
