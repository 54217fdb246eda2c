"""`entryway up` as a real process for tests: started on free ports, healthy before use,
stopped with SIGINT as an operator would."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import httpx

ENTRYWAY = str(Path(sys.executable).with_name("entryway"))


async def start(data_dir: Path, port: int, *extra: str) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        ENTRYWAY, "up", "--data-dir", str(data_dir), "--port", str(port), "--base-port", "0",
        *extra, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    async with httpx.AsyncClient() as http:
        for _ in range(600):
            try:
                if (await http.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200:
                    return proc
            except httpx.HTTPError:
                pass
            if proc.returncode is not None:
                raise AssertionError("entryway up exited")
            await asyncio.sleep(0.1)
    await stop(proc)
    raise AssertionError("entryway up did not become healthy")


async def stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.send_signal(signal.SIGINT)
        await asyncio.wait_for(proc.wait(), 30)
