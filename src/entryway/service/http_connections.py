"""What one HTTP connection may cost the process before and while it sends a request: the
request line's and the headers' size, the time to send them, the body's pace, the idle time
between requests, and how many connections are open at once, in all and from one address.

Why a uvicorn protocol class rather than an ASGI middleware: an ASGI app sees a request only
once its head has been parsed whole, and the harm is done by then. A head is held here
before the parser sees it: the bytes are counted as they arrive and the parser is given no
more than the limits allow, so a gigabyte of headers costs the limits' bytes, and a request
line is searched for its end within the limit only (one C-speed `find` over each piece, never
a rescan), so a line of any length is refused in constant time. Past a limit the connection
gets one short answer (414, 431, 408; 503 for a connection over a cap) and is closed; the
rest of what the client sends is never read.

The parser is uvicorn's httptools one; its own buffering stays within the same bounds, since
it is never given more than the head's limit (plus, for a request pipelined behind a body,
64 KiB). A chunked body's framing (chunk sizes, extensions, trailer fields) may
be no larger than the body plus the header limit, so that a trailer without end is refused
like a head without end (431)."""

from __future__ import annotations

import asyncio
import functools
import json
from collections import Counter
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from entryway.errors import ConfigurationError

BODY_SLICE = 64 * 1024  # what the parser is given at once of a body


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_request_line_bytes: int = 8 * 1024
    max_header_bytes: int = 32 * 1024  # the header lines together, the request line aside
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    body_min_rate: int = 1024  # bytes per second: each earns the body 1/rate s more
    keep_alive_timeout_s: float = 5.0
    send_timeout_s: float = 30.0  # an answer the client takes nothing of for this long
    max_connections: int = 4096
    max_connections_per_client: int = 256

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ConfigurationError(f"{f.name} must be positive, not {value!r}")


@dataclass(slots=True)
class OpenConnections:
    """The connections a server holds, in all and by client address."""

    total: int = 0
    by_address: Counter[str] = field(default_factory=Counter)


class _Refused(Exception):  # noqa: N818 - a signal within data_received
    def __init__(self, status: int) -> None:
        self.status = status


_ANSWERS = {
    408: ("Request Timeout", "request_timeout", "the request was not sent in time"),
    414: ("URI Too Long", "request_line_too_long", "the request line is too long"),
    431: (
        "Request Header Fields Too Large",
        "header_fields_too_large",
        "the request's header fields are too large",
    ),
    503: (
        "Service Unavailable",
        "too_many_connections",
        "too many connections are open; retry shortly",
    ),
}


@functools.cache
def refusal(status: int) -> bytes:
    """The whole answer to a connection refused at the edge: a problem, then the close."""
    title, code, detail = _ANSWERS[status]
    body = json.dumps(
        {
            "type": f"https://entryway.dev/problems/{code}",
            "title": title,
            "status": status,
            "code": code,
            "detail": detail,
        }
    ).encode()
    retry = b"retry-after: 1\r\n" if status == 503 else b""
    return (
        f"HTTP/1.1 {status} {title}\r\n".encode()
        + b"content-type: application/problem+json\r\n"
        + f"content-length: {len(body)}\r\n".encode()
        + retry
        + b"connection: close\r\n\r\n"
        + body
    )


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol held to `limits`; `open` is shared by the server's
    connections. Made per server by `guarded_protocol`."""

    limits: ClassVar[ConnectionLimits]
    open: ClassVar[OpenConnections]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._address: str | None = None  # set while the connection counts toward the caps
        self._timer: asyncio.TimerHandle | None = None
        self._send_timer: asyncio.TimerHandle | None = None  # while the client reads nothing
        self._reading_head = True
        self._line_open = True  # the request line's end not yet seen
        self._line_bytes = 0
        self._header_bytes = 0
        self._body_started = 0.0
        self._body_bytes = 0
        self._body_wire_bytes = 0

    # ------------------------------------------------------------------ the connection

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        address = self.client[0] if self.client else ""
        held = self.open
        if (
            held.total >= self.limits.max_connections
            or held.by_address[address] >= self.limits.max_connections_per_client
        ):
            self._refuse(503)
            return
        held.total += 1
        held.by_address[address] += 1
        self._address = address
        # A connection that never sends a byte is closed like a head that never ends.
        self._arm(self.limits.header_timeout_s, self._head_late)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._send_resumed()
        if self._address is not None:
            held = self.open
            held.total -= 1
            held.by_address[self._address] -= 1
            if held.by_address[self._address] <= 0:
                del held.by_address[self._address]
            self._address = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        while data and not self.transport.is_closing():
            if not self._reading_head:
                # In slices: a head pipelined behind the body's end, fed before it is seen,
                # escapes the head's count by no more than one slice.
                piece, data = data[:BODY_SLICE], data[BODY_SLICE:]
                self._body_wire_bytes += len(piece)
                super().data_received(piece)
                if not self._reading_head and self._framing_bytes() > self._framing_allowed():
                    self._refuse(431, awaiting_body=True)
                continue
            if self._timer is None:
                # A head's first bytes (the first request's clock runs from the connection).
                self._arm(self.limits.header_timeout_s, self._head_late)
            try:
                take = self._head_room(data)
            except _Refused as refused:
                self._refuse(refused.status)
                return
            super().data_received(data[:take] if take < len(data) else data)
            if not self._reading_head:
                # The head ended within this piece, somewhere: the rest of the piece is
                # counted as the body's, the head's share of it too (at most its limit).
                self._body_wire_bytes += take
            data = data[take:]
            full = self._header_bytes >= self.limits.max_header_bytes
            if self._reading_head and not self._line_open and full:
                self._refuse(431)  # the limit reached and the head still open
                return

    def _framing_bytes(self) -> int:
        """What a body's bytes on the wire hold besides the body: chunk sizes, chunk
        extensions and trailer fields, which the parser buffers but no route reads."""
        return self._body_wire_bytes - self._body_bytes

    def _framing_allowed(self) -> int:
        # As much as the body itself, and room for trailer fields as large as a head's
        # header fields (twice: a head's last piece may be counted here too). Only a body
        # cut into chunks of a byte or two passes it: no client sends one.
        return 2 * self.limits.max_header_bytes + self._body_bytes

    def _head_room(self, data: bytes) -> int:
        """How much of `data` the parser may take while a head is read."""
        if self._line_open:
            room = self.limits.max_request_line_bytes - self._line_bytes
            end = data.find(b"\n", 0, room)  # looks no further than the limit
            if end < 0:
                if len(data) >= room:
                    raise _Refused(414)
                self._line_bytes += len(data)
                return len(data)
            self._line_open = False
            self._line_bytes += end + 1
            return end + 1
        room = self.limits.max_header_bytes - self._header_bytes
        take = min(len(data), room)
        self._header_bytes += take
        return take

    def _refuse(self, status: int, *, awaiting_body: bool = False) -> None:
        """Answer `status` and close; with an answer to an earlier request still being made
        (a pipelined head), close only, rather than interleave two answers."""
        self._disarm()
        if self.transport.is_closing():
            return
        cycle = self.cycle
        idle = cycle is None or cycle.response_complete
        if idle or (awaiting_body and not cycle.response_started):
            # A route waiting for the body sees the disconnect and answers nothing.
            self.transport.write(refusal(status))
        self.transport.close()

    # ------------------------------------------------------------------ the parser's events

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._reading_head = False
        self._body_started = self.loop.time()
        self._body_bytes = self._body_wire_bytes = 0
        self._arm(self.limits.body_timeout_s, self._body_late)

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        super().on_body(body)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._disarm()
        self._reading_head = True
        self._line_open = True
        self._line_bytes = self._header_bytes = 0

    # ------------------------------------------------------------------ the clocks

    def _arm(self, delay: float, then: Any) -> None:
        self._disarm()
        self._timer = self.loop.call_later(delay, then)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _head_late(self) -> None:
        self._timer = None
        if not self._reading_head:
            return
        if self._line_bytes == 0 and self._header_bytes == 0:
            self._disarm()
            self.transport.close()  # nothing sent: nothing to answer
            return
        self._refuse(408)

    def _body_late(self) -> None:
        self._timer = None
        if self._reading_head:
            return
        earned = self.limits.body_timeout_s + self._body_bytes / self.limits.body_min_rate
        left = self._body_started + earned - self.loop.time()
        if left > 0:
            self._arm(left, self._body_late)
            return
        self._refuse(408, awaiting_body=True)

    def pause_writing(self) -> None:
        """The answer fills the socket's buffers: the client is not reading it. One that
        takes nothing for `send_timeout_s` is closed (the route sees the disconnect)."""
        super().pause_writing()
        if self._send_timer is None:
            self._send_timer = self.loop.call_later(self.limits.send_timeout_s, self._send_late)

    def resume_writing(self) -> None:
        self._send_resumed()
        super().resume_writing()

    def _send_resumed(self) -> None:
        if self._send_timer is not None:
            self._send_timer.cancel()
            self._send_timer = None

    def _send_late(self) -> None:
        self._send_timer = None
        self._disarm()
        self.transport.abort()  # what is still buffered for the client is dropped

    def timeout_keep_alive_handler(self) -> None:
        self._disarm()
        super().timeout_keep_alive_handler()


def guarded_protocol(limits: ConnectionLimits) -> type[GuardedHttpProtocol]:
    """A protocol class for one server: its own count of open connections."""
    return type(
        "GuardedHttpProtocol",
        (GuardedHttpProtocol,),
        {"limits": limits, "open": OpenConnections()},
    )


def server_options(limits: ConnectionLimits) -> dict[str, Any]:
    """What uvicorn.run / uvicorn.Config take to serve with `limits`."""
    return {
        "http": guarded_protocol(limits),
        "timeout_keep_alive": limits.keep_alive_timeout_s,
        "ws": "none",  # no route speaks WebSocket; an upgrade is an ordinary request
    }
