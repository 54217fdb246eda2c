"""An unhandled error, through a real uvicorn server as `entryway up` runs it: answered as one
500 problem naming the request, logged once with its id, and the keep-alive connection it
came on serves the next request."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator

import httpx
import pytest
import uvicorn
from fastapi import Request

from entryway.chain.transport import NODE_UNREACHABLE, RpcTransportError
from entryway.errors import EntrywayError
from entryway.service.app import create_app
from entryway.service.chain_access import NODE_RETRY_AFTER_S
from entryway.service.services import Services


@pytest.fixture
async def server() -> AsyncIterator[str]:
    app = create_app(Services())

    # Test-only routes: one that fails, one that tells which connection a request came on.
    @app.get("/test/fails")
    async def fails() -> None:
        raise RuntimeError("something the code did not expect")

    @app.get("/test/node-gone")
    async def node_gone() -> None:
        raise RpcTransportError()  # a read of the chain the node did not answer

    @app.get("/test/node-gone-wrapped")
    async def node_gone_wrapped() -> None:
        try:
            raise RpcTransportError()
        except RpcTransportError as exc:
            raise EntrywayError("the use case's own words") from exc

    @app.get("/test/peer")
    async def peer(request: Request) -> dict[str, int]:
        assert request.client is not None
        return {"port": request.client.port}

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, lifespan="off", log_config=None, http="h11", ws="none", access_log=False
    )
    uvicorn_server = uvicorn.Server(config)
    task = asyncio.create_task(uvicorn_server.serve(sockets=[sock]))
    for _ in range(1000):  # uvicorn offers a flag, not an event
        if uvicorn_server.started:
            break
        await asyncio.sleep(0.01)
    assert uvicorn_server.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        uvicorn_server.should_exit = True
        await task
        sock.close()


async def test_an_unhandled_error_is_one_logged_500_and_the_connection_serves_on(
    server: str, caplog: pytest.LogCaptureFixture
) -> None:
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    async with httpx.AsyncClient(base_url=server, limits=limits) as http:
        before = (await http.get("/test/peer")).json()["port"]
        with caplog.at_level(logging.INFO):
            failed = await http.get("/test/fails", headers={"X-Request-Id": "req-500-a"})
            after = await http.get("/test/peer")

    assert failed.status_code == 500
    assert failed.headers["content-type"] == "application/problem+json"
    assert failed.headers["X-Request-Id"] == "req-500-a"
    body = failed.json()
    assert (body["code"], body["requestId"]) == ("internal_error", "req-500-a")
    assert "something the code did not expect" not in failed.text  # no internals leak
    assert failed.headers["X-Content-Type-Options"] == "nosniff"

    assert after.status_code == 200
    assert after.json()["port"] == before, "the connection was dropped after the 500"

    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    assert "req-500-a" in errors[0].getMessage()
    assert errors[0].exc_info is not None and "did not expect" in str(errors[0].exc_info[1])


async def test_a_node_that_gave_no_answer_is_a_503_with_retry_after_not_a_500(
    server: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Whichever route met the node's silence, and whether or not it wrapped it."""
    async with httpx.AsyncClient(base_url=server) as http:
        with caplog.at_level(logging.INFO):
            answers = [await http.get(p) for p in ("/test/node-gone", "/test/node-gone-wrapped")]
    for answer in answers:
        assert answer.status_code == 503, answer.text
        assert answer.headers["Retry-After"] == str(NODE_RETRY_AFTER_S)
        assert answer.headers["content-type"] == "application/problem+json"
        body = answer.json()
        assert body["code"] == "network_connection_problem", body
        assert body["detail"] == NODE_UNREACHABLE and "requestId" in body
    # The node client logs the outage once; the answers add no error line of their own.
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
