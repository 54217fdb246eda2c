"""A bundler built by the standalone composition root, over the session's devnet, in manual
mode, its debug namespace on; each test starts from a cleared mempool and reputation."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.rpc_types import user_operation_json
from entryway.bundler.standalone import StandaloneSettings, build_bundler
from entryway.bundler.states import BundlingMode
from entryway.chain.rpc import EthClient
from entryway.devnet.devnet import Devnet
from entryway.domain.userop import UserOperation
from tests.integration.harness import ETHER, Harness


@dataclass
class RpcClient:
    """Calls the bundler's JSON-RPC methods the way a client would (minus HTTP)."""

    rpc: BundlerRpc
    entry_point: str

    async def call(self, method: str, *params: Any) -> dict[str, Any]:
        response = await self.rpc.dispatch(
            {"jsonrpc": "2.0", "id": 7, "method": method, "params": list(params)}
        )
        assert response is not None
        return response

    async def result(self, method: str, *params: Any) -> Any:
        response = await self.call(method, *params)
        assert "error" not in response, response
        return response["result"]

    async def error(self, method: str, *params: Any) -> dict[str, Any]:
        response = await self.call(method, *params)
        assert "error" in response, response
        error: dict[str, Any] = response["error"]
        return error

    async def send(self, op: UserOperation) -> str:
        return str(
            await self.result("eth_sendUserOperation", user_operation_json(op), self.entry_point)
        )

    async def send_error(self, op: UserOperation) -> dict[str, Any]:
        return await self.error("eth_sendUserOperation", user_operation_json(op), self.entry_point)

    async def bundle(self) -> str:
        return str(await self.result("debug_bundler_sendBundleNow"))


@pytest.fixture(scope="session")
async def bundler_rpc(devnet: Devnet, eth: EthClient) -> AsyncIterator[BundlerRpc]:
    executor = Harness.new_key()
    await eth.rpc.request("anvil_setBalance", [executor.address, hex(1000 * ETHER)])
    settings = StandaloneSettings(
        rpc_url=devnet.chains[0].rpc_url,
        entry_point=devnet.chains[0].deployment.entry_point,
        executor_keys=(executor,),
        debug_rpc=True,
        mode=BundlingMode.MANUAL,
    )
    rpc = await build_bundler(eth, settings)
    await rpc.start()
    yield rpc
    await rpc.stop()


@pytest.fixture
async def client(bundler_rpc: BundlerRpc) -> RpcClient:
    bundler_rpc.bundler.clear()
    bundler_rpc.bundler.mode = BundlingMode.MANUAL
    return RpcClient(bundler_rpc, bundler_rpc.bundler.config.entry_point)
