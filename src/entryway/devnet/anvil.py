"""Runs anvil (from the pinned npm package) as a child process."""

from __future__ import annotations

import asyncio
import shutil
import signal
import socket
from dataclasses import dataclass
from pathlib import Path

from entryway.chain.rpc import EthClient, JsonRpcClient, RpcTransportError
from entryway.devnet.ownership import NodeRecord, dying_with_this_process
from entryway.errors import ConfigurationError, EntrywayError

_NPM_BINARY = Path("node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil")
_READY_TIMEOUT_S = 30.0
_STOP_TIMEOUT_S = 15.0


class AnvilError(EntrywayError):
    pass


def find_anvil() -> Path:
    """The anvil binary: $ENTRYWAY_ANVIL, else the npm package's next to this project."""
    from entryway.settings.loading import anvil_from_environment

    configured = anvil_from_environment()
    if configured is not None:
        return configured
    here = Path(__file__).resolve()
    for base in (Path.cwd(), *here.parents):
        candidate = base / _NPM_BINARY
        if candidate.is_file():
            return candidate
    on_path = shutil.which("anvil")
    if on_path:
        return Path(on_path)
    raise ConfigurationError(
        "anvil not found: run `make setup` (it installs @foundry-rs/anvil-linux-amd64 from npm) "
        "or set ENTRYWAY_ANVIL"
    )


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


RECENT_STATES = 64


@dataclass(frozen=True, slots=True)
class AnvilConfig:
    chain_id: int
    port: int = 0  # 0: any free port
    host: str = "127.0.0.1"
    state_path: Path | None = None
    state_interval_s: int = 10
    block_time_s: float | None = None  # None: mine each transaction at once
    hardfork: str = "prague"
    default_create2_deployer: bool = True
    log_path: Path | None = None
    record_path: Path | None = None  # where its pid is kept, for the next start to reap
    base_fee_per_gas: int | None = None  # None: anvil's default (1 gwei)
    # False: anvil suggests tips from recent blocks alone, not at least 1 gwei (the fee
    # layer in front of it then applies the network's own minimum).
    min_suggested_tip: bool = True
    # Unix seconds of the genesis block; None: now. Anvil's clock runs on from there, so a
    # past value gives a chain whose head looks halted that long ago.
    genesis_timestamp: int | None = None


class AnvilProcess:
    """One anvil node. `start()` returns once it answers JSON-RPC; `stop()` dumps its state.
    It dies with the process that started it (`ownership`)."""

    def __init__(self, config: AnvilConfig) -> None:
        self.config = config
        self.port = config.port or free_port(config.host)
        self._process: asyncio.subprocess.Process | None = None

    @property
    def rpc_url(self) -> str:
        return f"http://{self.config.host}:{self.port}"

    def command(self) -> list[str]:
        c = self.config
        cmd = [
            str(find_anvil()),
            "--host",
            c.host,
            "--port",
            str(self.port),
            "--chain-id",
            str(c.chain_id),
            "--hardfork",
            c.hardfork,
            # Keep recent states in memory only: anvil otherwise spills them to
            # ~/.foundry/anvil/tmp (tens of GB over a long run). A few dozen, not none: a
            # simulation against the block that was latest a moment ago must still find it.
            "--prune-history",
            str(RECENT_STATES),
        ]
        if c.state_path is not None:
            cmd += ["--state", str(c.state_path), "--state-interval", str(c.state_interval_s)]
        if c.block_time_s is not None:
            cmd += ["--block-time", str(c.block_time_s)]
        if not c.default_create2_deployer:
            cmd.append("--disable-default-create2-deployer")
        if c.base_fee_per_gas is not None:
            cmd += ["--base-fee", str(c.base_fee_per_gas)]
        if not c.min_suggested_tip:
            cmd.append("--disable-min-priority-fee")
        if c.genesis_timestamp is not None:
            cmd += ["--timestamp", str(c.genesis_timestamp)]
        return cmd

    async def start(self) -> None:
        if self._process is not None:
            raise AnvilError("anvil already started")
        # A child's log file is opened once at spawn; the short blocking open is harmless here.
        log = open(self.config.log_path, "ab") if self.config.log_path else None  # noqa: SIM115, ASYNC230
        try:
            self._process = await asyncio.create_subprocess_exec(
                *dying_with_this_process(self.command()),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log or asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C in a terminal reaches us, not anvil directly
            )
        finally:
            if log is not None:
                log.close()
        record = NodeRecord.of(self._process.pid)
        if self.config.record_path is not None and record is not None:
            record.write(self.config.record_path)
        await self._wait_ready()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    async def exited(self) -> int:
        """Wait until the node exits (stopped or not); its exit code."""
        if self._process is None:
            raise AnvilError("anvil not started")
        return await self._process.wait()

    async def restart(self) -> None:
        """Start again on the same port, from the saved state, after the node exited."""
        await self.stop()
        await self.start()

    async def _wait_ready(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _READY_TIMEOUT_S
        async with JsonRpcClient(self.rpc_url, timeout=2.0) as rpc:
            eth = EthClient(rpc)
            while True:
                assert self._process is not None
                if self._process.returncode is not None:
                    raise AnvilError(
                        f"anvil for chain {self.config.chain_id} exited with "
                        f"{self._process.returncode} (port {self.port} taken?)"
                    )
                try:
                    chain_id = await eth.chain_id()
                except RpcTransportError:
                    if loop.time() > deadline:
                        await self.stop()
                        raise AnvilError(f"anvil did not answer on {self.rpc_url}") from None
                    await asyncio.sleep(0.05)
                    continue
                if chain_id != self.config.chain_id:
                    await self.stop()
                    raise AnvilError(
                        f"{self.rpc_url} answers chain id {chain_id}, "
                        f"not {self.config.chain_id}: another node holds the port"
                    )
                return

    async def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.returncode is None:
            await self._interrupt(process)
        if self.config.record_path is not None:
            self.config.record_path.unlink(missing_ok=True)

    async def _interrupt(self, process: asyncio.subprocess.Process) -> None:
        # SIGINT is anvil's orderly shutdown: it dumps --state before exiting.
        process.send_signal(signal.SIGINT)
        try:
            await asyncio.wait_for(process.wait(), _STOP_TIMEOUT_S)
        except TimeoutError:
            process.kill()
            await process.wait()
