"""`entryway up` owns its devnet nodes: they die with it even on SIGKILL, one that exits is
started again, and a port someone else holds stops the start."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
from pathlib import Path

import httpx

from entryway.devnet.anvil import free_port
from tests.running import ENTRYWAY, start, stop

_DEADLINE_S = 60.0


def _anvils(data_dir: Path) -> dict[int, int]:
    """The live anvil processes of this data dir's devnet, found in /proc (not through the
    devnet's own records): pid -> parent pid."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            stat = (proc / "stat").read_text()
        except OSError:
            continue
        state, ppid = stat[stat.rindex(")") + 2 :].split()[:2]
        named_anvil = any(arg.endswith(b"/anvil") for arg in cmdline[:1])
        if named_anvil and str(data_dir).encode() in b" ".join(cmdline) and state != "Z":
            found[int(proc.name)] = int(ppid)
    return found


def _anvil_of_chain(data_dir: Path, chain_id: int) -> int | None:
    state = str(data_dir / "devnet" / f"anvil-{chain_id}.json").encode()
    for pid in _anvils(data_dir):
        try:
            if state in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
        except OSError:
            continue
    return None


async def _poll(check: object, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _DEADLINE_S
    while not await check():  # type: ignore[operator]
        assert loop.time() < deadline, what
        await asyncio.sleep(0.2)


async def test_sigkill_of_up_leaves_no_node_and_the_next_start_owns_its_own(
    tmp_path: Path,
) -> None:
    proc = await start(tmp_path, free_port())
    try:
        assert len(_anvils(tmp_path)) == 2 and set(_anvils(tmp_path).values()) == {proc.pid}
        proc.send_signal(signal.SIGKILL)
        await proc.wait()

        async def none_left() -> bool:
            return not _anvils(tmp_path)

        await _poll(none_left, f"anvils outlived entryway up: {_anvils(tmp_path)}")
    finally:
        await stop(proc)
    again = await start(tmp_path, free_port())
    try:
        nodes = _anvils(tmp_path)
        assert len(nodes) == 2 and set(nodes.values()) == {again.pid}
    finally:
        await stop(again)
    assert not _anvils(tmp_path)


async def test_a_killed_node_is_restarted_and_the_service_recovers(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "up.log"
    proc = await start(tmp_path, port, log=log)
    try:
        demo = json.loads((tmp_path / "demo.json").read_text())
        chain = demo["chains"]["84532"]
        saved = tmp_path / "devnet" / "anvil-84532.json"

        async def state_saved() -> bool:
            return saved.exists()

        await _poll(state_saved, "anvil never saved its state")
        killed = _anvil_of_chain(tmp_path, 84532)
        assert killed is not None
        os.kill(killed, signal.SIGKILL)

        async with httpx.AsyncClient(timeout=5) as http:

            async def recovered() -> bool:
                node = _anvil_of_chain(tmp_path, 84532)
                if node is None or node == killed:
                    return False
                try:
                    code = await http.post(
                        chain["rpcUrl"],
                        json={
                            "jsonrpc": "2.0",
                            "id": 1,
                            "method": "eth_getCode",
                            "params": [chain["entryPoint"], "latest"],
                        },
                    )
                    rpc = await http.post(
                        f"http://127.0.0.1:{port}/rpc/84532",
                        params={"apikey": demo["apiKey"]},
                        json={"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []},
                    )
                    health = await http.get(f"http://127.0.0.1:{port}/healthz")
                except httpx.HTTPError:
                    return False
                if code.status_code != 200 or rpc.status_code != 200:
                    return False  # the node is still starting
                return (
                    len(code.json().get("result", "0x")) > 2
                    and rpc.json().get("result") == hex(84532)
                    and health.status_code == 200
                )

            await _poll(recovered, "the node was not restarted, or the service did not recover")
        assert _anvils(tmp_path)[_anvil_of_chain(tmp_path, 84532) or 0] == proc.pid
        assert proc.returncode is None
    finally:
        await stop(proc)
    said = log.read_text()
    assert said.count("devnet node for chain 84532 exited") == 1, said
    assert said.count("devnet node for chain 84532 is back") == 1, said


async def test_a_taken_port_stops_the_start_with_a_message_naming_it(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        proc = await asyncio.create_subprocess_exec(
            ENTRYWAY, "up", "--data-dir", str(tmp_path), "--port", str(free_port()),
            "--base-port", str(taken),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), 120)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    said = out.decode()
    assert proc.returncode != 0, said
    assert f"error: port {taken} on 127.0.0.1 is already in use" in said, said
    assert "Traceback" not in said, said
    assert not _anvils(tmp_path)
