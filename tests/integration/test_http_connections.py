"""The connection limits of every HTTP server the service starts, on a real uvicorn server
over raw sockets: request line (414), header size (431), the time to send a head (408, or
a silent close when nothing was sent), a body's pace (408), the keep-alive idle time, and
the caps on connections open at once, in all and from one address (503).

The server, as the operator endpoints serve (the API's `uvicorn.run` takes the same
options), runs in the test's event loop with short timeouts; the app behind it echoes the
body's length, so that a request that passes the limits shows it was served whole."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from starlette.types import Receive, Scope, Send

from entryway.composition.serving import connection_limits
from entryway.observability.operator_http import HttpAddress, serving
from entryway.service.http_connections import ConnectionLimits, server_options
from entryway.settings.loading import SettingsError, load_settings

LIMITS = ConnectionLimits(
    max_request_line_bytes=1024,
    max_header_bytes=4096,
    header_timeout_s=0.6,
    body_timeout_s=0.6,
    body_min_rate=1000,
    keep_alive_timeout_s=0.6,
    send_timeout_s=0.6,
    max_connections=20,
    max_connections_per_client=5,
)
BIG = 64 * 1024 * 1024
WAIT_S = 5.0  # far above every timeout above: a close that does not come fails the test


async def echo_length(scope: Scope, receive: Receive, send: Send) -> None:
    assert scope["type"] == "http"
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            break
    if scope["path"] == "/huge-answer":  # an answer larger than every socket buffer on the way
        body = b"B" * BIG
    else:
        body = json.dumps({"path": scope["path"], "received": size}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _serve(limits: ConnectionLimits) -> AsyncIterator[int]:
    """The app served as the operator endpoints are (`operator_http.serving`)."""
    async with serving(echo_length, HttpAddress(), server_options(limits)) as bound:
        yield bound.port


@pytest.fixture
async def port() -> AsyncIterator[int]:
    async for p in _serve(LIMITS):
        yield p


class Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def answer(self) -> tuple[int, dict[str, str], bytes]:
        """One response: status, headers, body (by Content-Length)."""
        head = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), WAIT_S)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {}
        for line in lines[1:]:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        body = await self.reader.readexactly(int(headers.get("content-length", "0")))
        return status, headers, body

    async def closed(self) -> bool:
        """Whether the server closes the connection within WAIT_S (reading what remains)."""
        try:
            while await asyncio.wait_for(self.reader.read(65536), WAIT_S):
                pass
        except TimeoutError:
            return False
        except ConnectionError:
            pass
        return True

    def close(self) -> None:
        self.writer.close()


_OPENED: list[Conn] = []


@pytest.fixture(autouse=True)
async def _close_every_connection() -> AsyncIterator[None]:
    yield
    while _OPENED:
        writer = _OPENED.pop().writer
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def connect(port: int, source: str = "127.0.0.1") -> Conn:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    _OPENED.append(Conn(reader, writer))
    return _OPENED[-1]


def get(path: str = "/", *headers: str) -> bytes:
    lines = [f"GET {path} HTTP/1.1", "Host: t", *headers, "", ""]
    return "\r\n".join(lines).encode()


async def test_a_request_line_past_the_limit_is_answered_414_and_closed(port: int) -> None:
    ok = await connect(port)
    await ok.send(get("/" + "a" * 900))
    status, _, body = await ok.answer()
    assert (status, json.loads(body)["path"]) == (200, "/" + "a" * 900)
    ok.close()

    long = await connect(port)
    await long.send(get("/" + "a" * 1100))
    status, headers, body = await long.answer()
    assert status == 414
    assert headers["content-type"] == "application/problem+json"
    assert headers["connection"] == "close"
    assert json.loads(body)["code"] == "request_line_too_long"
    assert await long.closed()


async def test_a_request_line_never_ended_is_refused_once_the_limit_is_read(port: int) -> None:
    conn = await connect(port)
    await conn.send(b"GET /" + b"a" * 2000)  # no end of line: refused on the limit alone
    status, _, body = await conn.answer()
    assert (status, json.loads(body)["code"]) == (414, "request_line_too_long")
    assert await conn.closed()


async def test_headers_past_the_limit_are_answered_431_and_closed(port: int) -> None:
    ok = await connect(port)
    await ok.send(get("/", *(f"X-Pad-{i}: {'b' * 50}" for i in range(60))))  # ~3.5 KiB
    assert (await ok.answer())[0] == 200
    ok.close()

    big = await connect(port)
    # Never ended, and all read by the server at once: refused when the limit is passed.
    await big.send(b"GET / HTTP/1.1\r\nHost: t\r\n" + b"X-Pad: " + b"b" * 5000 + b"\r\n")
    status, headers, body = await big.answer()
    assert (status, json.loads(body)["code"]) == (431, "header_fields_too_large")
    assert headers["connection"] == "close"
    assert await big.closed()


async def test_one_header_larger_than_the_limit_is_refused(port: int) -> None:
    conn = await connect(port)
    await conn.send(get("/", "X-Big: " + "c" * 10_000))
    status, _, _ = await conn.answer()
    assert status == 431
    assert await conn.closed()


async def test_a_head_sent_too_slowly_is_answered_408_and_closed(port: int) -> None:
    conn = await connect(port)
    await conn.send(b"GET / HTTP/1.1\r\nHost: t\r\n")  # and then nothing
    status, _, body = await conn.answer()
    assert (status, json.loads(body)["code"]) == (408, "request_timeout")
    assert await conn.closed()


async def test_a_connection_that_sends_nothing_is_closed_silently(port: int) -> None:
    conn = await connect(port)
    assert await conn.closed()
    assert conn.reader.at_eof()


async def test_a_head_trickled_byte_by_byte_is_cut_off_at_the_header_timeout(port: int) -> None:
    conn = await connect(port)
    head = get("/", *(f"X-T-{i}: v" for i in range(200)))[:3000]
    loop = asyncio.get_running_loop()
    started = loop.time()
    answered = asyncio.create_task(conn.answer())
    try:
        for byte in head:
            if answered.done() or loop.time() - started > WAIT_S:
                break
            await conn.send(bytes([byte]))
            await asyncio.sleep(0.005)
    except ConnectionError:
        pass
    try:
        status: int | None = (await answered)[0]
    except (ConnectionError, asyncio.IncompleteReadError):
        status = None  # closed while this client still sent: a reset may overtake the 408
    assert status in (408, None)
    assert await conn.closed()
    assert loop.time() - started < WAIT_S  # closed by the header timeout, not after the head


async def test_blank_lines_trickled_between_requests_are_held_to_the_header_timeout(
    port: int,
) -> None:
    conn = await connect(port)
    await conn.send(get("/first"))
    assert (await conn.answer())[0] == 200
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        while not conn.reader.at_eof() and loop.time() - started < WAIT_S:
            await conn.send(b"\r\n")  # before the keep-alive timeout, never a request
            await asyncio.sleep(0.2)
    except ConnectionError:
        pass
    assert await conn.closed()
    assert loop.time() - started < WAIT_S


async def test_a_body_slower_than_the_minimum_rate_is_answered_408(port: int) -> None:
    conn = await connect(port)
    await conn.send(b"POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n")
    for _ in range(4):  # 10 bytes every 0.1 s: 100 B/s, a tenth of the minimum; then none
        await conn.send(b"x" * 10)
        await asyncio.sleep(0.1)
    status, _, body = await conn.answer()
    assert (status, json.loads(body)["code"]) == (408, "request_timeout")
    assert await conn.closed()


async def test_a_body_at_a_steady_rate_earns_the_time_it_needs(port: int) -> None:
    conn = await connect(port)
    size = 4000  # at 5,000 B/s: 0.8 s, past the 0.6 s body timeout, within its earned time
    await conn.send(f"POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: {size}\r\n\r\n".encode())
    for _ in range(size // 500):
        await conn.send(b"y" * 500)
        await asyncio.sleep(0.1)
    status, _, body = await conn.answer()
    assert (status, json.loads(body)["received"]) == (200, size)
    conn.close()


async def test_a_chunked_body_is_served_and_endless_trailers_are_refused(port: int) -> None:
    chunked = b"POST /c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
    ok = await connect(port)
    await ok.send(chunked + b"".join(b"%x\r\n%s\r\n" % (n, b"z" * n) for n in range(1, 60)))
    await ok.send(b"0\r\nX-Trailer: t\r\n\r\n")
    status, _, body = await ok.answer()
    assert (status, json.loads(body)["received"]) == (200, sum(range(1, 60)))

    endless = await connect(port)
    await endless.send(chunked + b"5\r\nhello\r\n0\r\n")
    answered = asyncio.create_task(endless.answer())
    for i in range(1000):  # 1 MiB at most; refused after the header limit and a read
        if answered.done():
            break
        await endless.send(b"X-T-%d: %s\r\n" % (i, b"t" * 1000))
        await asyncio.sleep(0.005)
    try:
        status, _, body = await answered
        assert (status, json.loads(body)["code"]) == (431, "header_fields_too_large")
    except (ConnectionError, asyncio.IncompleteReadError):
        pass  # closed while this client still sent: a reset may overtake the 431
    assert await endless.closed()

    extended = await connect(port)  # chunk extensions no route reads, as large as one likes
    await extended.send(chunked + b"1;ext=" + b"e" * 10_000 + b"\r\n")
    assert (await extended.answer())[0] == 431
    assert await extended.closed()


async def test_keep_alive_serves_several_requests_then_closes_when_idle(port: int) -> None:
    conn = await connect(port)
    await conn.send(get("/one") + get("/two"))  # pipelined
    assert json.loads((await conn.answer())[2])["path"] == "/one"
    assert json.loads((await conn.answer())[2])["path"] == "/two"
    upload = b"u" * 300_000  # given to the parser in slices, the request behind it whole
    post = b"POST /big HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(upload)
    await conn.send(post + upload + get("/after"))
    assert json.loads((await conn.answer())[2]) == {"path": "/big", "received": len(upload)}
    assert json.loads((await conn.answer())[2])["path"] == "/after"
    await asyncio.sleep(0.3)  # idle, but less than the keep-alive timeout
    await conn.send(get("/three"))
    assert json.loads((await conn.answer())[2])["path"] == "/three"
    assert await conn.closed()  # then idle past the keep-alive timeout


async def test_a_client_that_reads_nothing_of_its_answer_is_cut_off(port: int) -> None:
    conn = await connect(port)
    await conn.send(get("/huge-answer"))
    await asyncio.sleep(0.6 + 2.0)  # the send timeout, and time for the buffers to fill
    received = 0
    with contextlib.suppress(ConnectionError):
        while chunk := await asyncio.wait_for(conn.reader.read(1 << 20), WAIT_S):
            received += len(chunk)
    assert 0 < received < BIG  # what the buffers held; the rest was dropped with the close


async def test_one_address_may_hold_only_its_share_of_connections(port: int) -> None:
    held = [await connect(port) for _ in range(LIMITS.max_connections_per_client)]
    for conn in held:  # each is served
        await conn.send(get("/"))
        assert (await conn.answer())[0] == 200
    over = await connect(port)
    status, headers, body = await over.answer()
    assert (status, json.loads(body)["code"]) == (503, "too_many_connections")
    assert headers["retry-after"] == "1"
    assert await over.closed()

    other = await connect(port, source="127.0.0.2")  # another client is not held to it
    await other.send(get("/"))
    assert (await other.answer())[0] == 200

    held.pop().close()
    await asyncio.sleep(0.2)
    again = await connect(port)
    await again.send(get("/"))
    assert (await again.answer())[0] == 200
    for conn in [*held, other, again]:
        conn.close()


async def test_the_process_holds_at_most_its_connections() -> None:
    limits = replace(LIMITS, max_connections=6, max_connections_per_client=5)
    async for port in _serve(limits):
        held = [await connect(port, f"127.0.0.{2 + i // 3}") for i in range(6)]
        for conn in held:
            await conn.send(get("/"))
            assert (await conn.answer())[0] == 200
        over = await connect(port, "127.0.0.9")
        assert (await over.answer())[0] == 503
        assert await over.closed()
        for conn in held:
            conn.close()


def test_the_limits_are_settings_of_the_http_table(monkeypatch: pytest.MonkeyPatch) -> None:
    assert connection_limits(load_settings(None)) == ConnectionLimits()
    monkeypatch.setenv("ENTRYWAY_HTTP__MAX_HEADER_BYTES", "2048")
    monkeypatch.setenv("ENTRYWAY_HTTP__HEADER_TIMEOUT_S", "2.5")
    monkeypatch.setenv("ENTRYWAY_HTTP__MAX_CONNECTIONS_PER_CLIENT", "7")
    chosen = connection_limits(load_settings(None))
    assert (chosen.max_header_bytes, chosen.header_timeout_s) == (2048, 2.5)
    assert chosen.max_connections_per_client == 7


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("ENTRYWAY_HTTP__HEADER_TIMEOUT_S", "0"),
        ("ENTRYWAY_HTTP__MAX_REQUEST_LINE_BYTES", "16"),
        ("ENTRYWAY_HTTP__MAX_CONNECTIONS", "-1"),
    ],
)
def test_a_limit_out_of_bounds_stops_the_start(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as refused:
        load_settings(None)
    key = variable.removeprefix("ENTRYWAY_HTTP__").lower()
    assert any(f"http.{key}" in problem for problem in refused.value.problems), refused.value
