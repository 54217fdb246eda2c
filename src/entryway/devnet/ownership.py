"""Devnet nodes belong to the process that started them, and die with it.

Two guards, because either alone leaves a gap:

- a parent-death signal: each anvil is started through a tiny Python step that asks Linux
  (`prctl(PR_SET_PDEATHSIG)`) to send it SIGTERM when its parent goes, even on SIGKILL,
  then becomes anvil (`exec`). SIGTERM lets anvil write its `--state` before exiting. Linux
  sends it when the thread that started the node ends: nodes are started from the event
  loop's thread, which lives as long as the process;
- a node record (`anvil-<chain>.pid`: pid and start time) that the next start reads: a node
  still alive from an earlier start is stopped before its port is checked.

A port held by anything else stops the start (`DevnetPortTakenError`): a node no one started here
must never be used as if it were ours.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from entryway.errors import EntrywayError

log = logging.getLogger(__name__)

_REAP_TIMEOUT_S = 15.0
_POLL_S = 0.05

# Run by the child's Python before it becomes anvil. The parent's pid is checked after the
# prctl call: a parent that died in between would otherwise never send the signal.
_DIE_WITH_PARENT = """\
import ctypes, os, signal, sys
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
if os.getppid() != int(sys.argv[1]):
    sys.exit(70)
os.execv(sys.argv[2], sys.argv[2:])
"""


class DevnetPortTakenError(EntrywayError):
    pass


def dying_with_this_process(command: list[str]) -> list[str]:
    """`command`, started so that it gets SIGTERM when this process dies (Linux; elsewhere
    the node record is the only guard)."""
    if not sys.platform.startswith("linux"):
        return command
    return [sys.executable, "-I", "-S", "-c", _DIE_WITH_PARENT, str(os.getpid()), *command]


def ensure_port_free(host: str, port: int, what: str) -> None:
    """Raise `DevnetPortTakenError` when something listens on `host:port`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # A port in TIME_WAIT after our own node's restart is free to listen on again.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            raise DevnetPortTakenError(
                f"port {port} on {host} is already in use, so {what} cannot start there; "
                "stop the program that holds it, or choose other ports (--base-port)"
            ) from None


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """Which process a devnet node is: its pid and its start time (so a reused pid is never
    taken for it)."""

    pid: int
    started: str

    @classmethod
    def of(cls, pid: int) -> NodeRecord | None:
        started = _start_time(pid)
        return cls(pid, started) if started is not None else None

    def write(self, path: Path) -> None:
        path.write_text(f"{self.pid} {self.started}\n")

    @classmethod
    def read(cls, path: Path) -> NodeRecord | None:
        try:
            pid, started = path.read_text().split()
            return cls(int(pid), started)
        except (OSError, ValueError):
            return None

    def alive(self) -> bool:
        return _start_time(self.pid) == self.started


async def reap_leftover(path: Path, what: str) -> None:
    """Stop the node `path` records if it still runs (SIGTERM: it keeps its state; SIGKILL
    if it does not go), and forget the record."""
    record = NodeRecord.read(path)
    if record is not None and record.alive():
        log.warning("stopping %s left running by an earlier start (pid %d)", what, record.pid)
        _signal(record.pid, signal.SIGTERM)
        if not await _gone(record, _REAP_TIMEOUT_S):
            _signal(record.pid, signal.SIGKILL)
            await _gone(record, _REAP_TIMEOUT_S)
    _forget(path)


async def _gone(record: NodeRecord, timeout_s: float) -> bool:
    for _ in range(int(timeout_s / _POLL_S)):
        if not record.alive():
            return True
        await asyncio.sleep(_POLL_S)
    return not record.alive()


def _forget(path: Path) -> None:
    path.unlink(missing_ok=True)


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot; None when it is gone or a
    zombie (already dead, waiting for its parent)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Fields after the command name, which is in parentheses and may hold spaces.
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X") and not _threads_running(pid):
        return None
    return fields[19]


def _threads_running(pid: int) -> bool:
    """Whether a thread of `pid` still runs. A multi-threaded process whose main thread has
    exited shows as a zombie while its other threads, which still hold its sockets, finish."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return False
    for task in tasks:
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        if stat[stat.rindex(")") + 2 :].split()[0] not in ("Z", "X"):
            return True
    return False
