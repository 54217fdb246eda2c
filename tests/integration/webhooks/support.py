"""What the webhook and worker tests share: a settable clock, a project with credits, the box
sealing signing secrets, and a real HTTP receiver on a loopback port whose answers the test
scripts (a loopback receiver needs the operator's opt-in to private destinations)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.devnet.anvil import free_port
from entryway.domain.credits import CreditLot, LotKind
from entryway.domain.plans import PlanName
from entryway.domain.webhooks import DisabledReason, WebhookEndpoint
from entryway.storage.schema import usage_events
from entryway.storage.secret_box import SecretBox
from entryway.storage.store import Store

START = datetime(2026, 11, 21, 12, tzinfo=UTC)
GRANT = 1_000

HANG = "hang"  # accept the request and never answer it
SECRETS_KEY = bytes(range(32))
SECRETS = SecretBox(SECRETS_KEY)


class FakeClock:
    def __init__(self, start: datetime = START) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    @property
    def unix(self) -> int:
        return int(self.now.timestamp())


async def until(condition: Callable[[], Awaitable[bool]], within: float = 20.0) -> None:
    """Poll the database (there is no event to wait on) until `condition` holds."""
    async with asyncio.timeout(within):
        while not await condition():  # noqa: ASYNC110 - polling another process's writes
            await asyncio.sleep(0.05)


async def new_project(engine: AsyncEngine, *, at: datetime = START) -> str:
    """A STARTER project with credits from `at` on (charges made earlier find none)."""
    store = Store(engine)
    owner = await store.create_user(f"{uuid.uuid4()}@example.org", at)
    project_id = await store.create_project(owner, "hooks", PlanName.STARTER, [80002], at)
    await store.add_lot(project_id, CreditLot.new(f"{project_id}-extra", LotKind.GRANT, GRANT, at))
    return project_id


async def balance(engine: AsyncEngine, project_id: str) -> int:
    return (await Store(engine).credit_account(project_id)).balance(START)


async def webhook_charges(engine: AsyncEngine, project_id: str) -> int:
    async with engine.connect() as db:
        count = await db.scalar(
            select(func.count())
            .select_from(usage_events)
            .where(
                usage_events.c.project_id == project_id,
                usage_events.c.operation == "webhook_delivery",
            )
        )
    return int(count or 0)


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class RecordedAlerts:
    raised: list[tuple[str, DisabledReason, str]] = field(default_factory=list)

    async def endpoint_disabled(
        self, endpoint: WebhookEndpoint, reason: DisabledReason, detail: str
    ) -> None:
        self.raised.append((endpoint.endpoint_id, reason, detail))


class Receiver:
    """A minimal HTTP/1.1 server (one request per connection). Until start() nothing listens
    on its port, so attempts meet a refused connection: the receiver is down. Each request
    gets the next scripted answer (a status code, or HANG), then `default`."""

    def __init__(self, answers: Iterable[int | str] = (), default: int = 204) -> None:
        self.port = free_port()
        self.answers = list(answers)
        self.default = default
        self.received: list[Received] = []
        self.connections = 0  # accepted, whether or not a request followed
        self.arrived = asyncio.Event()
        self._release = asyncio.Event()
        self._server: asyncio.Server | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def stop(self) -> None:
        self._release.set()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> Receiver:
        await self.start()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.stop()

    async def wait_for(self, count: int) -> None:
        """Until `count` requests arrived (the caller bounds the wait with asyncio.timeout)."""
        while len(self.received) < count:
            self.arrived.clear()
            await self.arrived.wait()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            path = head[0].split(" ")[1]
            headers = {
                k.strip().lower(): v.strip()
                for k, _, v in (line.partition(":") for line in head[1:] if line)
            }
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            self.received.append(Received(path, headers, body))
            self.arrived.set()
            answer = self.answers.pop(0) if self.answers else self.default
            if answer == HANG:
                await self._release.wait()
                return
            status = f"HTTP/1.1 {answer} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            writer.write(status.encode())
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
