"""The node client against real sockets on 127.0.0.1: failover between endpoints, retries
of reads only, and writes that are never sent twice. The nodes are tiny aiohttp servers
that record every method they receive; a dead node is a port nobody listens on."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from entryway.chain.retry import RetryPolicy
from entryway.chain.rpc import EthClient, JsonRpcClient, RpcError, RpcTransportError
from entryway.chain.transport import NODE_UNREACHABLE
from entryway.devnet.anvil import free_port

CHAIN_ID = 80002
TX_HASH = "0x" + "ab" * 32
REVERT = "0x08c379a0" + "00" * 4
FAST = RetryPolicy(attempts=3, backoff_base_s=0.01, backoff_cap_s=0.02, cooldown_s=30.0)

Behaviour = Callable[["FakeNode", Any], Awaitable[web.Response]]


async def answers(node: FakeNode, payload: Any) -> web.Response:
    def one(call: dict[str, Any]) -> dict[str, Any]:
        result = {"eth_chainId": hex(CHAIN_ID), "eth_sendRawTransaction": TX_HASH}
        return {"jsonrpc": "2.0", "id": call["id"], "result": result.get(call["method"], "0x1")}

    return web.json_response(
        [one(c) for c in payload] if isinstance(payload, list) else one(payload)
    )


async def unavailable(node: FakeNode, payload: Any) -> web.Response:
    return web.Response(status=503, text="<html>upstream unavailable</html>")


async def rate_limited(node: FakeNode, payload: Any) -> web.Response:
    error = {"code": -32005, "message": "too many requests"}
    return web.json_response({"jsonrpc": "2.0", "id": None, "error": error}, status=429)


async def hangs(node: FakeNode, payload: Any) -> web.Response:
    await node.released.wait()  # past any client timeout: set when the test ends
    return await answers(node, payload)


def reverts(status: int) -> Behaviour:
    async def behaviour(node: FakeNode, payload: Any) -> web.Response:
        error = {"code": 3, "message": "execution reverted", "data": REVERT}
        return web.json_response(
            {"jsonrpc": "2.0", "id": payload["id"], "error": error}, status=status
        )

    return behaviour


@dataclass
class FakeNode:
    behaviour: Behaviour
    url: str = ""
    received: list[str] = field(default_factory=list)
    released: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, request: web.Request) -> web.Response:
        payload = await request.json()
        calls = payload if isinstance(payload, list) else [payload]
        self.received.extend(c["method"] for c in calls)
        return await self.behaviour(self, payload)


@asynccontextmanager
async def running(*behaviours: Behaviour) -> AsyncIterator[list[FakeNode]]:
    nodes, runners = [], []
    try:
        for behaviour in behaviours:
            node = FakeNode(behaviour)
            app = web.Application()
            app.router.add_post("/{tail:.*}", node.handle)
            runner = web.AppRunner(app, shutdown_timeout=0.5)
            runners.append(runner)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            port = runner.addresses[0][1]
            node.url = f"http://127.0.0.1:{port}/v2/secret-api-key"
            nodes.append(node)
        yield nodes
    finally:
        for node in nodes:
            node.released.set()
        for runner in runners:
            await runner.cleanup()


def dead_url() -> str:
    return f"http://127.0.0.1:{free_port()}/v2/secret-api-key"


async def test_a_read_fails_over_from_a_closed_port() -> None:
    async with running(answers) as [live], JsonRpcClient([dead_url(), live.url]) as rpc:
        assert await EthClient(rpc).chain_id() == CHAIN_ID
    assert live.received == ["eth_chainId"]


async def test_a_read_fails_over_from_an_endpoint_answering_503_after_its_retries() -> None:
    async with (
        running(unavailable, answers) as [down, live],
        JsonRpcClient([down.url, live.url], retry=FAST) as rpc,
    ):
        assert await EthClient(rpc).chain_id() == CHAIN_ID
    assert down.received == ["eth_chainId"] * FAST.attempts
    assert live.received == ["eth_chainId"]


async def test_a_rate_limited_read_fails_over() -> None:
    async with (
        running(rate_limited, answers) as [limited, live],
        JsonRpcClient([limited.url, live.url], retry=FAST) as rpc,
    ):
        assert await EthClient(rpc).block_number() == 1
    assert len(limited.received) == FAST.attempts
    assert live.received == ["eth_blockNumber"]


async def test_a_read_fails_over_from_a_hanging_endpoint_after_one_timeout() -> None:
    async with (
        running(hangs, answers) as [stuck, live],
        JsonRpcClient([stuck.url, live.url], timeout=0.5, retry=FAST) as rpc,
    ):
        started = time.monotonic()
        assert await EthClient(rpc).chain_id() == CHAIN_ID
        assert time.monotonic() - started < 1.5  # one timeout, not one per attempt
    assert stuck.received == ["eth_chainId"]
    assert live.received == ["eth_chainId"]


async def test_a_read_batch_fails_over() -> None:
    async with (
        running(unavailable, answers) as [down, live],
        JsonRpcClient([down.url, live.url], retry=FAST) as rpc,
    ):
        got = await rpc.batch([("eth_chainId", []), ("eth_getCode", ["0x" + "00" * 20])])
    assert got == [hex(CHAIN_ID), "0x1"]
    assert live.received == ["eth_chainId", "eth_getCode"]


async def test_a_write_is_not_sent_twice_when_the_endpoint_times_out_after_receiving_it() -> None:
    async with (
        running(hangs, answers) as [stuck, live],
        JsonRpcClient([stuck.url, live.url], timeout=0.5, retry=FAST) as rpc,
    ):
        with pytest.raises(RpcTransportError):
            await EthClient(rpc).send_raw_transaction(b"\x02signed")
    assert stuck.received == ["eth_sendRawTransaction"]  # it may have landed there…
    assert live.received == []  # …so it was sent nowhere else


async def test_a_write_is_not_repeated_after_an_http_error() -> None:
    async with (
        running(unavailable, answers) as [down, live],
        JsonRpcClient([down.url, live.url], retry=FAST) as rpc,
    ):
        with pytest.raises(RpcTransportError):
            await EthClient(rpc).send_raw_transaction(b"\x02signed")
    assert down.received == ["eth_sendRawTransaction"]
    assert live.received == []


async def test_a_write_moves_on_when_the_connection_is_refused_before_sending() -> None:
    async with running(answers) as [live], JsonRpcClient([dead_url(), live.url]) as rpc:
        assert await EthClient(rpc).send_raw_transaction(b"\x02signed") == TX_HASH
    assert live.received == ["eth_sendRawTransaction"]


@pytest.mark.parametrize("status", [200, 500])
async def test_a_revert_is_the_nodes_answer_and_is_not_retried(status: int) -> None:
    async with (
        running(reverts(status), answers) as [reverting, other],
        JsonRpcClient([reverting.url, other.url], retry=FAST) as rpc,
    ):
        with pytest.raises(RpcError) as raised:
            await EthClient(rpc).call("0x" + "11" * 20, b"\x01")
    assert raised.value.revert_data == bytes.fromhex(REVERT[2:])
    assert reverting.received == ["eth_call"]
    assert other.received == []


async def test_retries_are_bounded_and_the_error_tells_no_internals(
    caplog: pytest.LogCaptureFixture,
) -> None:
    policy = RetryPolicy(attempts=4, backoff_base_s=0.05, backoff_cap_s=0.1)
    async with (
        running(unavailable, unavailable) as [first, second],
        JsonRpcClient([first.url, second.url], retry=policy) as rpc,
    ):
        started = time.monotonic()
        with caplog.at_level(logging.INFO, "entryway.chain"), pytest.raises(RpcTransportError) as e:
            await EthClient(rpc).chain_id()
        elapsed = time.monotonic() - started
    assert len(first.received) == len(second.received) == 4
    assert elapsed < 2 * 3 * 0.1 + 1.0  # three backoffs of at most the cap, per endpoint
    assert str(e.value) == NODE_UNREACHABLE == "the chain's node is unreachable; try again shortly"
    assert "503" in caplog.text  # the details go to the operator's log…
    assert "secret-api-key" not in caplog.text  # …without the key in the endpoint's path


async def test_a_failed_endpoint_is_passed_over_until_its_cool_down_ends() -> None:
    policy = RetryPolicy(attempts=1, cooldown_s=0.5)
    async with (
        running(unavailable, answers) as [primary, fallback],
        JsonRpcClient([primary.url, fallback.url], retry=policy) as rpc,
    ):
        eth = EthClient(rpc)
        await eth.chain_id()
        await eth.chain_id()
        assert primary.received == ["eth_chainId"]  # the second read went straight on
        primary.behaviour = answers
        await asyncio.sleep(0.6)
        await eth.chain_id()
    assert primary.received == ["eth_chainId"] * 2  # preferred again once rested
    assert fallback.received == ["eth_chainId"] * 2


async def test_one_dead_endpoint_raises_a_transport_error() -> None:
    async with JsonRpcClient(dead_url(), retry=FAST) as rpc:
        with pytest.raises(RpcTransportError) as e:
            await EthClient(rpc).block_number()
    assert str(e.value) == NODE_UNREACHABLE


async def slow(node: FakeNode, payload: Any) -> web.Response:
    await asyncio.sleep(0.5)  # past the client's timeout, within its trace timeout
    return await answers(node, payload)


async def test_a_call_gives_up_at_the_timeout_and_a_trace_at_the_trace_timeout() -> None:
    async with (
        running(slow) as [node],
        JsonRpcClient(node.url, timeout=0.2, trace_timeout=3.0, retry=FAST) as rpc,
    ):
        with pytest.raises(RpcTransportError):
            await rpc.request("eth_blockNumber")
        assert rpc.unreachable  # the gate of the API asks the node again before trusting it
        assert await rpc.request("debug_traceCall", [{}, "latest", {}]) == "0x1"
        assert not rpc.unreachable
        assert await rpc.request("eth_blockNumber", deadline_s=3.0) == "0x1"  # a call's own
