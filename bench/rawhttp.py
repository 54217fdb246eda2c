"""A minimal HTTP/1.1 exchange for load generators: httpx costs more CPU per request than the
servers under test do, and would be what a benchmark measured."""

from __future__ import annotations

import asyncio


async def round_trip(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> bytes:
    """Send one request on a keep-alive connection; the response's head (its body is read and
    dropped; responses here always carry Content-Length)."""
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    await reader.readexactly(length)
    return head
