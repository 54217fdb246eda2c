"""A webhook from a running `entryway up` to a receiver that checks it with the SDK's
`verify_webhook`, its delivery followed through `client.task_status`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from entryway_sdk import Entryway, WebhookVerificationError, verify_webhook

from entryway.devnet.anvil import free_port
from tests.sdk.conftest import Service

pytestmark = pytest.mark.anvil


class Receiver:
    """The smallest HTTP server that keeps each POST's headers and raw body, answers 204."""

    def __init__(self) -> None:
        self.port = free_port()
        self.received: asyncio.Queue[tuple[dict[str, str], bytes]] = asyncio.Queue()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        headers = dict(line.split(": ", 1) for line in head[1:] if ": " in line)
        length = int({k.lower(): v for k, v in headers.items()}["content-length"])
        await self.received.put((headers, await reader.readexactly(length)))
        writer.write(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()
        await writer.wait_closed()


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    receiver = Receiver()
    server = await asyncio.start_server(receiver.handle, "127.0.0.1", receiver.port)
    async with server:
        yield receiver


async def test_a_test_event_verifies_and_its_task_succeeds(
    service: Service, receiver: Receiver
) -> None:
    auth = {"Authorization": f"Bearer {service.api_key}"}
    async with httpx.AsyncClient(base_url=service.url, headers=auth) as http:
        created = await http.post(
            "/v1/webhooks/endpoints",
            json={"url": f"http://127.0.0.1:{receiver.port}/hook", "eventTypes": ["credits.low"]},
        )
        assert created.status_code == 201, created.text
        endpoint = created.json()
        queued = await http.post(f"/v1/webhooks/endpoints/{endpoint['id']}/test")
        assert queued.status_code == 202, queued.text
    task_id = queued.json()["taskId"]

    headers, body = await asyncio.wait_for(receiver.received.get(), 30)
    event = verify_webhook(endpoint["secret"], headers, body)
    assert event["type"] == "webhook.test"
    with pytest.raises(WebhookVerificationError):
        verify_webhook(endpoint["secret"], headers, body + b" ")

    async with await Entryway.init(
        api_key=service.api_key,
        rpc_url=service.rpc_url(80002),
        chain_id=80002,
        base_url=service.url,
    ) as client:
        for _ in range(100):
            task = await client.task_status(task_id)
            if task.state == "succeeded":
                break
            await asyncio.sleep(0.1)
        assert task.state == "succeeded" and task.kind == "webhook.deliver"
        assert task.attempts == 1 and task.finished_at is not None
