"""The service under test for bench/sponsor.py: `entryway up` as its own process (as an
operator runs it), a tenant made through the operator routes, and CPU accounting by process.

The process is started with `--base-port 0` (free devnet ports) and rate limits out of the
way; it is stopped with SIGINT, as Ctrl-C would, so anvil's state is written and its
processes end with it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from entryway.devnet.anvil import free_port

ENTRYWAY = str(Path(sys.executable).with_name("entryway"))
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Tenant:
    project_id: str
    api_key: str


@dataclass
class RunningService:
    proc: asyncio.subprocess.Process
    base_url: str
    data_dir: Path
    log_path: Path

    @property
    def demo(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.data_dir / "demo.json").read_text())
        return data

    def rpc_url(self, chain_id: int) -> str:
        return str(self.demo["chains"][str(chain_id)]["rpcUrl"])

    async def tenant(self, chain_id: int, credits: int) -> Tenant:
        """A project on `chain_id` with `credits` bought, through the operator routes."""
        token = (self.data_dir / "admin-token").read_text().strip()
        admin = {"Authorization": f"Bearer {token}"}
        body = {
            "email": f"bench-{secrets.token_hex(4)}@example.org",
            "name": "sponsor bench",
            "chains": [chain_id],
        }
        async with httpx.AsyncClient(base_url=self.base_url, timeout=30) as http:
            r = await http.post("/v1/admin/projects", json=body, headers=admin)
            r.raise_for_status()
            created = r.json()
            purchase = {"purchaseId": f"bench-{secrets.token_hex(4)}", "credits": credits}
            url = f"/v1/admin/projects/{created['projectId']}/purchases"
            (await http.post(url, json=purchase, headers=admin)).raise_for_status()
        return Tenant(created["projectId"], created["apiKey"])

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time (user + system) so far of the service and of its anvil children."""
        children = [pid for pid in _pids() if _stat(pid).get("ppid") == self.proc.pid]
        anvil = sum(_cpu(pid) for pid in children)
        return {"service": _cpu(self.proc.pid), "anvil": anvil}

    def log_problems(self) -> list[str]:
        """The service's WARNING and ERROR log lines (tracebacks' first lines)."""
        lines = self.log_path.read_text(errors="replace").splitlines()
        return [line for line in lines if " WARNING " in line or " ERROR " in line]


@contextlib.asynccontextmanager
async def entryway_up(data_dir: Path, env: dict[str, str]) -> AsyncIterator[RunningService]:
    port = free_port()
    log_path = data_dir / "entryway-up.log"
    with log_path.open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            ENTRYWAY, "up", "--data-dir", str(data_dir), "--port", str(port), "--base-port", "0",
            stdout=log, stderr=log, env={**os.environ, **env},
        )  # fmt: skip
    service = RunningService(proc, f"http://127.0.0.1:{port}", data_dir, log_path)
    try:
        await _healthy(service)
        yield service
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGINT)
            try:
                await asyncio.wait_for(proc.wait(), 60)
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def _healthy(service: RunningService) -> None:
    async with httpx.AsyncClient() as http:
        for _ in range(1200):
            with contextlib.suppress(httpx.HTTPError):
                if (await http.get(f"{service.base_url}/healthz")).status_code == 200:
                    return
            if service.proc.returncode is not None:
                raise RuntimeError(f"entryway up exited; see {service.log_path}")
            await asyncio.sleep(0.1)
    raise RuntimeError("entryway up did not become healthy within 120 s")


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields) - idle) / TICKS, sum(fields) / TICKS


def own_cpu() -> float:
    times = os.times()
    return times.user + times.system


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _stat(pid: int) -> dict[str, int]:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return {}
    rest = raw.rsplit(")", 1)[1].split()  # after "pid (comm)"
    return {"ppid": int(rest[1]), "utime": int(rest[11]), "stime": int(rest[12])}


def _cpu(pid: int) -> float:
    stat = _stat(pid)
    return (stat.get("utime", 0) + stat.get("stime", 0)) / TICKS
