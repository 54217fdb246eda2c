"""A minimal HTTP/1.1 exchange for load generators: httpx costs more CPU per request than the
servers under test do, and would be what a benchmark measured."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass


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


@dataclass(frozen=True, slots=True)
class Run:
    latencies: list[float]  # seconds, one per request answered in the measured window
    errors: int  # answers that did not start with the expected status line
    elapsed: float
    warm_requests: int


async def drive(
    base: str,
    request: Callable[[], bytes],
    *,
    ok: bytes,
    concurrency: int,
    seconds: float,
    warmup: float = 2.0,
) -> Run:
    """`concurrency` keep-alive connections sending `request()` back to back: `warmup`
    seconds unmeasured, then `seconds` measured."""
    host, port = base.removeprefix("http://").split(":")

    async def user(until: float, record: list[float], bad: list[int]) -> None:
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            while time.perf_counter() < until:
                body = request()
                t0 = time.perf_counter()
                head = await round_trip(reader, writer, body)
                record.append(time.perf_counter() - t0)
                bad[0] += not head.startswith(ok)
        finally:
            writer.close()

    warm: list[float] = []
    stop = time.perf_counter() + warmup
    await asyncio.gather(*(user(stop, warm, [0]) for _ in range(concurrency)))
    latencies: list[float] = []
    errors = [0]
    started = time.perf_counter()
    await asyncio.gather(*(user(started + seconds, latencies, errors) for _ in range(concurrency)))
    return Run(latencies, errors[0], time.perf_counter() - started, len(warm))
