"""A chain's node going down and coming back, as clients and the operator see it: every
answer names the condition (never a host, a port or an exception), and the log holds one
warning for the outage and one line for its end, however many calls failed in between.
The node is a tiny aiohttp server on a fixed port, stopped (the port then refuses) and
started again on the same port."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest
from aiohttp import web

from entryway.bundler.op_codec import codec_for
from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.rpc_types import user_operation_json
from entryway.chain.retry import RetryPolicy
from entryway.chain.rpc import EthClient, JsonRpcClient, RpcTransportError
from entryway.chain.transport import NODE_UNREACHABLE
from entryway.devnet.anvil import free_port
from entryway.domain.userop import UserOperation

CHAIN_ID = 80002
ENTRY_POINT = "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108"
# Retries fast and never rests an endpoint, so every call reaches the closed port.
FAST = RetryPolicy(attempts=3, backoff_base_s=0.01, backoff_cap_s=0.02, cooldown_s=0.0)


class Node:
    """A node answering every read with 0x1 and eth_chainId with CHAIN_ID, on `port`."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}/v2/secret-api-key"
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: web.Request) -> web.Response:
        call = await request.json()
        result = hex(CHAIN_ID) if call["method"] == "eth_chainId" else "0x1"
        return web.json_response({"jsonrpc": "2.0", "id": call["id"], "result": result})


def leaks(text: str, node: Node) -> list[str]:
    """What of the node's address, its key or an exception's repr shows in `text`."""
    return [s for s in ("127.0.0.1", str(node.port), "secret-api-key", "Error(") if s in text]


def chain_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "entryway.chain" and r.levelno >= logging.INFO]


class NodeBackedBundler:
    """The part of the bundler `BundlerRpc` sends through: its send asks the node."""

    def __init__(self, eth: EthClient) -> None:
        self.eth = eth
        self.config = SimpleNamespace(entry_point=ENTRY_POINT)  # the EntryPoint it serves
        self.codec = codec_for(ENTRY_POINT)  # the release's op shapes

    async def send(self, op: UserOperation, before_mempool: Any = None) -> bytes:
        await self.eth.get_nonce(op.sender)
        return b"\x01" * 32


def send_request() -> dict[str, Any]:
    op = UserOperation(
        sender="0x" + "11" * 20, nonce=0, call_data=b"", call_gas_limit=100_000,
        verification_gas_limit=100_000, pre_verification_gas=50_000,
        max_fee_per_gas=10**9, max_priority_fee_per_gas=10**9,
    )  # fmt: skip
    params = [user_operation_json(op), ENTRY_POINT]
    return {"jsonrpc": "2.0", "id": 1, "method": "eth_sendUserOperation", "params": params}


async def test_an_outage_answers_the_condition_and_logs_once_down_and_once_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    node = Node(free_port())
    await node.start()
    try:
        async with JsonRpcClient(node.url, retry=FAST, chain_id=CHAIN_ID) as rpc:
            eth = EthClient(rpc)
            bundler = BundlerRpc(NodeBackedBundler(eth), estimator=None)  # type: ignore[arg-type]
            with caplog.at_level(logging.DEBUG):
                assert await eth.chain_id() == CHAIN_ID
                await node.stop()

                for _ in range(12):  # reads, each retried, and a write
                    with pytest.raises(RpcTransportError) as e:
                        await eth.block_number()
                    assert str(e.value) == NODE_UNREACHABLE
                with pytest.raises(RpcTransportError) as e:
                    await eth.send_raw_transaction(b"\x02")
                assert str(e.value) == NODE_UNREACHABLE

                answer = await bundler.dispatch(send_request())  # a JSON-RPC send
                assert answer is not None
                assert answer["error"] == {"code": -32603, "message": NODE_UNREACHABLE}
                assert leaks(str(answer), node) == []

                down = chain_lines(caplog)
                assert [r.levelno for r in down] == [logging.WARNING], caplog.text
                assert f"chain {CHAIN_ID}" in down[0].getMessage()
                assert "endpoint #1" in down[0].getMessage()

                await node.start()
                assert await eth.block_number() == 1
                assert await eth.block_number() == 1
        back = chain_lines(caplog)[1:]
        assert len(back) == 1, caplog.text
        assert back[0].getMessage().startswith(f"node of chain {CHAIN_ID} reachable again after")
        ours = [r for r in caplog.records if r.name.startswith("entryway")]
        for record in ours:  # nothing the service logged names the node's address or key
            assert leaks(record.getMessage(), node) == [], record.getMessage()
            assert record.exc_info is None, record.getMessage()  # and no traceback
        assert len(ours) > 36  # the debug lines of each failure and retry were looked at
    finally:
        await node.stop()
