"""A TCP proxy a test starts, stops and makes hang, in front of a real server (anvil, Redis):
the server going away, coming back, or taking connections and never answering, without
touching the server other tests share."""

from __future__ import annotations

import asyncio
import socket


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class TcpProxy:
    """Forwards each connection to `host:upstream_port` while started. While `hang` is set a
    new connection is taken and read from, and nothing is forwarded or answered."""

    def __init__(self, host: str, upstream_port: int) -> None:
        self.host = host
        self.upstream_port = upstream_port
        self.port = free_port()
        self.hang = False
        self.connections = 0  # taken since the proxy was made
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)

    async def stop(self) -> None:
        """No longer listening, and every connection through it closed."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._writers):
            writer.close()
        self._writers.clear()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        if self.hang:
            self._writers.add(writer)
            while await reader.read(65536):
                pass
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(self.host, self.upstream_port)
        except OSError:
            writer.close()
            return
        self._writers |= {writer, up_writer}
        await asyncio.gather(
            self._pipe(reader, up_writer), self._pipe(up_reader, writer), return_exceptions=True
        )
        self._writers -= {writer, up_writer}

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while chunk := await reader.read(65536):
                writer.write(chunk)
                await writer.drain()
        finally:
            writer.close()
