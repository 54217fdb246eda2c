"""A small HTTP endpoint served beside a process's own work, in its event loop: how the
processes that serve no API (the bundler of an intake chain, the task worker) answer an
orchestrator's probes and a Prometheus scraper.

The socket is bound here, before anything is served, so that a port already taken stops the
process at its start with a clear message. The server leaves the process's signals alone:
the process stops it when its own work stops."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import uvicorn
from starlette.types import ASGIApp

from entryway.errors import EntrywayError

STOP_S = 5.0  # how long a scrape in flight may take to finish when the process stops


@dataclass(frozen=True, slots=True)
class HttpAddress:
    host: str = "127.0.0.1"
    port: int = 0  # 0: any free port

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


class _QuietServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # SIGINT and SIGTERM belong to the process, which stops this server itself


def _listening(address: HttpAddress) -> socket.socket:
    family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
    try:
        sock = socket.create_server((address.host, address.port), family=family)
    except OSError as exc:
        raise EntrywayError(f"cannot serve HTTP on {address}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock


@asynccontextmanager
async def serving(
    app: ASGIApp, address: HttpAddress, options: Mapping[str, Any] | None = None
) -> AsyncIterator[HttpAddress]:
    """`app` served on `address` for the block's duration, with `options` for uvicorn's
    Config (the connection limits: `service.http_connections.server_options`); yields where
    it listens (the port chosen, for port 0)."""
    sock = _listening(address)
    bound = HttpAddress(address.host, int(sock.getsockname()[1]))
    config = uvicorn.Config(
        app,
        lifespan="off",
        log_level="warning",
        log_config=None,
        access_log=False,
        **(options or {}),
    )
    server = _QuietServer(config)
    task = asyncio.create_task(server.serve(sockets=[sock]), name=f"operator-http {bound}")
    try:
        yield bound
    finally:
        server.should_exit = True
        try:
            await asyncio.wait_for(task, STOP_S)
        except TimeoutError:
            pass  # wait_for cancelled it
        finally:
            sock.close()
