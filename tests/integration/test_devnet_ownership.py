"""A devnet start stops the nodes an earlier start in the same data dir left running, and
only those."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from entryway.devnet.anvil import AnvilConfig, AnvilProcess, find_anvil, free_port
from entryway.devnet.devnet import claim_ports
from entryway.devnet.ownership import DevnetPortTakenError, NodeRecord

CHAIN_ID = 31337


async def _listening(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    writer.close()
    await writer.wait_closed()
    return True


async def test_a_node_left_by_an_earlier_start_is_stopped_and_its_port_reclaimed(
    tmp_path: Path,
) -> None:
    port = free_port()
    # Started on its own, as a node whose parent died without taking it along would be.
    leftover = await asyncio.create_subprocess_exec(
        str(find_anvil()), "--port", str(port), "--chain-id", str(CHAIN_ID),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        for _ in range(600):
            if await _listening(port):
                break
            await asyncio.sleep(0.05)
        (tmp_path / "devnet").mkdir()
        record = NodeRecord.of(leftover.pid)
        assert record is not None
        record.write(tmp_path / "devnet" / f"anvil-{CHAIN_ID}.pid")

        assert await claim_ports(tmp_path, [CHAIN_ID], port) == [port]
        await asyncio.wait_for(leftover.wait(), 5)  # claim_ports returned once it was gone
        assert not (tmp_path / "devnet" / f"anvil-{CHAIN_ID}.pid").exists()
    finally:
        if leftover.returncode is None:
            leftover.kill()
            await leftover.wait()


async def test_a_process_the_record_does_not_name_is_left_alone(tmp_path: Path) -> None:
    bystander = await asyncio.create_subprocess_exec("sleep", "60")
    node = AnvilProcess(AnvilConfig(chain_id=CHAIN_ID))
    await node.start()
    try:
        (tmp_path / "devnet").mkdir()
        # Its pid, another start time: the pid was reused since the record was written.
        NodeRecord(bystander.pid, "1").write(tmp_path / "devnet" / f"anvil-{CHAIN_ID}.pid")
        with pytest.raises(DevnetPortTakenError, match=f"port {node.port} on 127.0.0.1"):
            await claim_ports(tmp_path, [CHAIN_ID], node.port)
        assert bystander.returncode is None and NodeRecord.of(bystander.pid) is not None
        assert await _listening(node.port)  # a node this data dir never recorded: not ours
    finally:
        bystander.kill()
        await bystander.wait()
        await node.stop()
