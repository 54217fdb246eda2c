"""The production processes as a benchmark runs them: a plain anvil, `entryway deploy`, a fresh
PostgreSQL database, `entryway migrate`, `entryway api --config` replicas and `entryway
bundler --config --chain N`, each a real subprocess. `Cluster` stops every process it
started and drops its database when its block ends, also on an error or Ctrl-C."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import asyncpg
import httpx
from eth_account import Account

from bench.api import POSTGRES, drop_database, fresh_database, tenant
from entryway.deploy.plan import Operator, plan_deployment
from entryway.devnet.anvil import AnvilConfig, AnvilProcess, free_port

ENTRYWAY = str(Path(sys.executable).with_name("entryway"))
REDIS = os.environ.get("ENTRYWAY_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
STOP_S = 10.0  # SIGTERM, then SIGKILL after this long
TICK = os.sysconf("SC_CLK_TCK")
# PostgreSQL sessions sampled this often during a multi-process run (`Cluster.sessions`): 10
# queries a second in the load generator, enough for a mean over a run of several seconds.
SESSIONS_EVERY_S = 0.1


def _environment() -> dict[str, str]:
    """This environment without ENTRYWAY_* settings: the config file alone configures."""
    return {k: v for k, v in os.environ.items() if not k.startswith("ENTRYWAY_")}


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a live process (0 when it cannot be read)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


@dataclass
class Cluster:
    """Anvil with Entryway deployed, and a fresh database; processes added by `spawn`."""

    root: Path
    chain_id: int
    block_time_s: float
    rpc_url: str = ""
    database_url: str = ""
    api_key: str = ""
    operator: str = ""  # hex key of the account `entryway deploy` ran with
    deploy_owner: str = ""
    entry_point: str = ""
    keys: dict[str, Path] = field(default_factory=dict)
    procs: dict[str, asyncio.subprocess.Process] = field(default_factory=dict)
    _database: str | None = None
    _stack: AsyncExitStack = field(default_factory=AsyncExitStack)

    async def __aenter__(self) -> Cluster:
        try:
            await self._start()
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._stack.aclose()
        if exc is not None:  # what the processes said, before the temporary folder goes
            for log in sorted(self.root.glob("*.log")):
                tail = log.read_text(errors="replace").splitlines()[-20:]
                print(f"--- {log.name}", *tail, sep="\n", file=sys.stderr)

    async def _start(self) -> None:
        node = AnvilProcess(
            AnvilConfig(chain_id=self.chain_id, block_time_s=self.block_time_s)
        )  # only for its command line: the cluster owns the process
        self.rpc_url = node.rpc_url
        await self.spawn("anvil", *node.command(), program="")
        await self.until(lambda http: http.post(self.rpc_url, json=_call("eth_chainId")))
        accounts = {name: Account.create() for name in ("operator", "signer", "notary")}
        async with httpx.AsyncClient() as http:
            for account in (accounts["operator"], accounts["notary"]):
                balance = [account.address, hex(10**21)]
                await http.post(self.rpc_url, json=_call("anvil_setBalance", balance))
        for name, account in accounts.items():
            self.keys[name] = self.root / f"{name}.key"
            self.keys[name].write_text(account.key.hex() + "\n")
        self.operator = accounts["operator"].key.hex()
        await self.run(
            "deploy", "--rpc-url", self.rpc_url, "--key-file", str(self.keys["operator"]),
            "--chain-id", str(self.chain_id), "--paymaster-signer", accounts["signer"].address,
            "--notary-submitter", accounts["notary"].address,
            "--paymaster-deposit-wei", str(10**18), "--paymaster-stake-wei", str(10**17),
        )  # fmt: skip
        self.deploy_owner = accounts["operator"].address
        plan = plan_deployment(Operator(*(accounts[n].address for n in accounts)))
        self.entry_point = plan.entry_point.address
        self.database_url, self._database = await fresh_database("postgresql", self.root)
        self._stack.push_async_callback(_drop, self._database)
        await self.run("migrate", "--config", str(self.config("migrate", [])))
        _, self.api_key = await tenant(self.database_url)

    def config(self, name: str, executor_keys: list[str]) -> Path:
        """A config file: this cluster's database, Redis and chain, bundled through the
        intake, rate limits raised out of the way; executor keys only for the bundler."""
        executors = self.root / f"{name}-executors.key"
        executors.write_text("\n".join(executor_keys) + "\n")
        files = f'["{executors}"]' if executor_keys else "[]"
        lines = [
            f'data_dir = "{self.root / "data"}"',  # one secrets key for every process
            f'database_url = "{self.database_url}"',
            f'redis_url = "{REDIS}"',
            'rate_limits = "FREE=1000000/second"',
            'heavy_rate_limits = "FREE=1000000/second"',
            "[[chains]]",
            f"chain_id = {self.chain_id}",
            f'rpc_urls = ["{self.rpc_url}"]',
            'bundling = "intake"',
            f"executor_key_files = {files}",
            f'paymaster_signer_key_file = "{self.keys["signer"]}"',
            f'notary_submitter_key_file = "{self.keys["notary"]}"',
            f'deploy_owner = "{self.deploy_owner}"',
        ]
        path = self.root / f"{name}.toml"
        path.write_text("\n".join(lines) + "\n")
        return path

    async def run(self, *args: str) -> None:
        """An `entryway` command to its end; its output in the error when it fails."""
        proc = await asyncio.create_subprocess_exec(
            ENTRYWAY, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            env=_environment(),
        )  # fmt: skip
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), 300)
        finally:
            await _stop(proc)
        if proc.returncode != 0:
            raise RuntimeError(f"entryway {args[0]} failed: {out.decode()[-2000:]}")

    async def spawn(
        self, name: str, *args: str, program: str = ENTRYWAY, stdout: int | None = None
    ) -> asyncio.subprocess.Process:
        """A long-running process, stopped when the cluster's block ends."""
        command = [program, *args] if program else list(args)
        with (self.root / f"{name}.log").open("ab") as log:
            proc = await asyncio.create_subprocess_exec(
                *command, stdout=stdout or asyncio.subprocess.DEVNULL, stderr=log,
                env=_environment(),
            )  # fmt: skip
        self._stack.push_async_callback(_stop, proc)
        self.procs[name] = proc
        return proc

    async def api(self, name: str) -> str:
        """One more `entryway api --config` replica; its base URL once it is healthy."""
        port = free_port()
        proc = await self.spawn(name, "api", "--config", str(self.config("api", [])),
                                "--port", str(port))  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        await self.until(lambda http: http.get(f"{base}/healthz"), proc)
        return base

    async def serve(self, name: str, executor_keys: list[str]) -> str:
        """`entryway serve --config`: the API, the worker and the chain's leader in one
        process, on this cluster's database; its base URL once it is healthy."""
        port = free_port()
        config = self.config(name, executor_keys)
        proc = await self.spawn(name, "serve", "--config", str(config), "--port", str(port))
        base = f"http://127.0.0.1:{port}"
        await self.until(lambda http: http.get(f"{base}/healthz"), proc)
        return base

    async def bundler(self, executor_keys: list[str]) -> None:
        """The chain's `entryway bundler --config --chain N`; returns once it leads."""
        config = self.config("bundler", executor_keys)
        proc = await self.spawn(
            "leader", "bundler", "--config", str(config), "--chain", str(self.chain_id),
            stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        assert proc.stdout is not None
        while True:
            line = await asyncio.wait_for(proc.stdout.readline(), 120)
            if not line:
                raise RuntimeError("the bundler exited before leading")
            if json.loads(line) == {"leading": self.chain_id}:
                return

    async def sessions(
        self, until: asyncio.Event, every_s: float = SESSIONS_EVERY_S
    ) -> dict[str, float]:
        """Until `until` is set, the mean number of this database's sessions waiting on a
        lock, in a transaction waiting for their client, and running a statement (over the
        samples taken: a server restart ends the sampling, it does not fail the bench). The
        sampling runs in the load generator's event loop, beside the clients it times, and
        on the measured side only: it is kept light (SESSIONS_EVERY_S)."""
        admin = await asyncpg.connect(POSTGRES)
        totals = {"waiting on a lock": 0, "in a transaction, waiting for the client": 0,
                  "running a statement": 0}  # fmt: skip
        samples = 0
        try:
            while not until.is_set():
                try:
                    rows = await admin.fetch(
                        "SELECT state, wait_event_type FROM pg_stat_activity WHERE datname = $1",
                        self._database,
                    )
                except Exception:  # a diagnostic: what was sampled stands
                    break
                samples += 1
                for r in rows:
                    if r["wait_event_type"] == "Lock":
                        totals["waiting on a lock"] += 1
                    elif r["state"] == "idle in transaction":
                        totals["in a transaction, waiting for the client"] += 1
                    elif r["state"] == "active":
                        totals["running a statement"] += 1
                await asyncio.sleep(every_s)
        finally:
            admin.terminate()
        return {k: v / max(samples, 1) for k, v in totals.items()}

    async def backends(self) -> list[int]:
        """The PostgreSQL server processes serving this cluster's database."""
        admin = await asyncpg.connect(POSTGRES)
        try:
            rows = await admin.fetch(
                "SELECT pid FROM pg_stat_activity WHERE datname = $1", self._database
            )
        finally:
            await admin.close()
        return [int(r["pid"]) for r in rows]

    async def until(
        self,
        ask: Callable[[httpx.AsyncClient], Awaitable[httpx.Response]],
        proc: asyncio.subprocess.Process | None = None,
        within: float = 60,
    ) -> None:
        """Ask until the answer is 200, for `within` seconds; an error if `proc` exits
        first or the time runs out."""
        deadline = time.monotonic() + within
        async with httpx.AsyncClient() as http:
            while time.monotonic() < deadline:
                if proc is not None and proc.returncode is not None:
                    raise RuntimeError("the process exited before it answered")
                try:
                    if (await ask(http)).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.1)
        raise RuntimeError("no answer in time")


def _call(method: str, params: list[object] | None = None) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or []}


async def _drop(name: str | None) -> None:
    """Drop the database, waiting out a server that is restarting (others share it)."""
    for attempt in range(30):
        try:
            await drop_database(name)
            return
        except (OSError, asyncpg.CannotConnectNowError):
            if attempt == 29:
                raise
            await asyncio.sleep(1)


async def _stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), STOP_S)
        except TimeoutError:
            proc.kill()
            await proc.wait()
