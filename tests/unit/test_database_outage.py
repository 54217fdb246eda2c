"""A database that cannot be reached is answered 503 `service_unavailable` with Retry-After
(the request may be sent again), not a 500; a statement the database refused stays a 500.
A bundler standby waits out such a database instead of crashing."""

from __future__ import annotations

import socket

import httpx
import pytest
from asyncpg import exceptions as pg
from fastapi import FastAPI
from sqlalchemy import exc as sa
from sqlalchemy import text

from entryway.service.edge import EdgeMiddleware
from entryway.storage.engine import make_engine
from entryway.storage.leader_lock import LeaderLock, leader_key
from entryway.storage.outage import database_unavailable


def _wrapped(orig: BaseException, *, invalidated: bool = False) -> sa.DBAPIError:
    """As SQLAlchemy raises an asyncpg error: a DBAPIError over it, the driver's one its cause."""
    error = sa.DBAPIError("SELECT 1", None, orig, connection_invalidated=invalidated)
    error.__cause__ = orig
    return error


def _raised_from(error: BaseException, cause: BaseException) -> BaseException:
    error.__cause__ = cause
    return error


@pytest.mark.parametrize(
    "exc",
    [
        _wrapped(pg.CannotConnectNowError("the database system is shutting down")),
        _wrapped(pg.AdminShutdownError("terminating connection due to administrator command")),
        _wrapped(pg.ConnectionDoesNotExistError("connection was closed")),
        _wrapped(ConnectionRefusedError(111, "Connect call failed")),
        _wrapped(Exception("server closed the connection"), invalidated=True),
        _wrapped(pg.TooManyConnectionsError("sorry, too many clients already")),
        _wrapped(pg.DiskFullError("could not extend file: No space left on device")),
        _wrapped(
            pg.ReadOnlySQLTransactionError("cannot execute INSERT in a read-only transaction")
        ),
        sa.TimeoutError("QueuePool limit reached, connection timed out"),
        _raised_from(RuntimeError("unit of work failed"), _wrapped(OSError("reset"))),
    ],
)
def test_connection_errors_are_an_outage(exc: BaseException) -> None:
    assert database_unavailable(exc)


@pytest.mark.parametrize(
    "exc",
    [
        _wrapped(pg.UniqueViolationError("duplicate key")),
        _wrapped(pg.QueryCanceledError("canceling statement due to statement timeout")),
        sa.IntegrityError("INSERT", None, Exception("constraint")),
        ConnectionRefusedError(111, "a node or a webhook receiver, not the database"),
        RuntimeError("a bug"),
    ],
)
def test_other_errors_are_not(exc: BaseException) -> None:
    assert not database_unavailable(exc)


async def test_a_refused_connection_is_an_outage() -> None:
    """Connecting to a port nobody listens on: asyncpg's bare OSError, through the engine."""
    engine = make_engine(f"postgresql://entryway@127.0.0.1:{_closed_port()}/entryway")
    try:
        with pytest.raises(OSError) as raised:
            async with engine.connect() as db:
                await db.execute(text("SELECT 1"))
    finally:
        await engine.dispose()
    assert database_unavailable(raised.value)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _app(exc: Exception) -> FastAPI:
    app = FastAPI()
    app.add_middleware(EdgeMiddleware)  # inside Starlette's own error middleware, as served

    @app.get("/v1/project")
    async def fails() -> None:
        raise exc

    @app.post("/rpc/{chain_id}")
    async def rpc_fails(chain_id: int) -> None:
        raise exc

    return app


async def _get(exc: Exception) -> httpx.Response:
    transport = httpx.ASGITransport(app=_app(exc))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        return await http.get("/v1/project")


async def test_the_edge_answers_an_outage_503_with_retry_after() -> None:
    answer = await _get(_wrapped(pg.CannotConnectNowError("the database system is starting up")))
    assert answer.status_code == 503
    assert int(answer.headers["Retry-After"]) >= 1
    body = answer.json()
    assert body["code"] == "service_unavailable"
    assert body["requestId"] == answer.headers["X-Request-Id"]
    assert "shutting down" not in answer.text and "starting up" not in answer.text


async def test_json_rpc_reads_an_outage_as_a_json_rpc_error() -> None:
    transport = httpx.ASGITransport(app=_app(_wrapped(pg.CannotConnectNowError("starting up"))))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        answer = await http.post("/rpc/84532", json={"jsonrpc": "2.0", "id": 1, "method": "x"})
    assert answer.status_code == 503 and int(answer.headers["Retry-After"]) >= 1
    assert answer.headers["content-type"] == "application/json"
    assert answer.json()["error"]["code"] == -32603


async def test_the_edge_answers_a_refused_statement_500() -> None:
    answer = await _get(_wrapped(pg.UniqueViolationError("duplicate key")))
    assert answer.status_code == 500
    assert answer.json()["code"] == "internal_error"
    assert "Retry-After" not in answer.headers


async def test_a_standby_waits_out_a_database_that_refuses_connections() -> None:
    """A bundler standing by while PostgreSQL restarts keeps standing by: no lock, no crash."""
    engine = make_engine(f"postgresql://entryway@127.0.0.1:{_closed_port()}/entryway")
    lock = LeaderLock(engine, leader_key(84532, ["0x" + "11" * 20]))
    try:
        assert await lock.try_acquire() is False
        assert await lock.try_acquire() is False  # polled again: still waiting
        assert await lock.still_held() is False
    finally:
        await lock.release()
        await engine.dispose()
