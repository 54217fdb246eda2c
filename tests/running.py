"""`entryway up` as a real process for tests: started on free ports, healthy before use,
stopped with SIGINT as an operator would."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path

import httpx

ENTRYWAY = str(Path(sys.executable).with_name("entryway"))


async def start(
    data_dir: Path,
    port: int,
    *extra: str,
    env: Mapping[str, str] | None = None,
    log: Path | None = None,
) -> asyncio.subprocess.Process:
    """`entryway up` with `extra` arguments and `env` over this process's environment;
    its output goes to `log` when given."""
    out = log.open("ab") if log is not None else asyncio.subprocess.DEVNULL
    proc = await asyncio.create_subprocess_exec(
        ENTRYWAY, "up", "--data-dir", str(data_dir), "--port", str(port), "--base-port", "0",
        *extra, stdout=out, stderr=asyncio.subprocess.STDOUT if log else out,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    if log is not None:
        out.close()  # type: ignore[union-attr]
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


async def start_unthrottled(
    data_dir: Path, port: int, name: str
) -> tuple[asyncio.subprocess.Process, str, str]:
    """`entryway up` with rate limits out of the way (they are tested on their own; under
    fuzzing they would only hide what lies behind them), and the admin key of a fresh
    project made by the operator. Returns the process, the base URL and the key."""
    proc = await start(
        data_dir,
        port,
        env={
            "ENTRYWAY_RATE_LIMITS": "FREE=1000000/second",
            "ENTRYWAY_HEAVY_RATE_LIMITS": "FREE=1000000/second",
        },
    )
    url = f"http://127.0.0.1:{port}"
    token = (data_dir / "admin-token").read_text().strip()
    async with httpx.AsyncClient(base_url=url) as http:
        made = await http.post(
            "/v1/admin/projects",
            headers={"Authorization": f"Bearer {token}"},
            json={"email": f"{name}@example.org", "name": name, "chains": [80002, 84532]},
        )
    if made.status_code != 201:
        await stop(proc)
        raise AssertionError(made.text)
    return proc, url, str(made.json()["apiKey"])


FINAL_STATUSES = ("included", "failed", "dropped")


async def statuses_until_final(
    url: str, key: str, chain_id: int, op_hash: str, *, within_s: float
) -> list[str]:
    """Every status `/op-status` gives the op until a final one (within `within_s`); it
    must never be anything but found (200)."""
    seen: list[str] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    async with httpx.AsyncClient(base_url=url) as http:
        while loop.time() < deadline:
            r = await http.get(
                "/op-status",
                params={"chainId": chain_id, "userOpHash": op_hash},
                headers={"Authorization": f"Bearer {key}"},
            )
            assert r.status_code == 200, r.text
            seen.append(r.json()["status"])
            if seen[-1] in FINAL_STATUSES:
                return seen
            await asyncio.sleep(0.25)
    raise AssertionError(f"op {op_hash} not final: {seen[-5:]}")
