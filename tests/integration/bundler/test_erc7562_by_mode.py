"""The validation modes other than `opcodes` through the bundler itself, on real anvil: every
case of the ERC-7562 suite whose rule the mode claims (docs/bundler.md, "Validation modes")
is refused by a bundler in that mode for that rule and entity, and the clean and staked
cases are accepted, as the struct logger's bundler (test_erc7562.py) does. `native` claims
every case and runs behind a relay answering as geth 1.16 (its erc7562Tracer played by a
script on anvil); `calls` is pinned on anvil itself. The cases `calls` does not claim are
left to test_calls_mode.py, which holds that they are never refused wrongly."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.standalone import StandaloneSettings, build_bundler
from entryway.bundler.states import BundlingMode
from entryway.bundler.validation.modes import ValidationMode
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.devnet.devnet import Devnet
from tests.integration.bundler.conftest import RpcClient
from tests.integration.bundler.rules_setup import RuleContracts, deploy_rule_contracts
from tests.integration.bundler.test_calls_mode import CASES, Case, _op
from tests.integration.bundler.test_erc7562 import BANNED
from tests.integration.harness import ETHER, Harness
from tests.node_kinds import node_relay

CLAIMED = [c for c in CASES if c.enforced]


@pytest.fixture(scope="module")
async def rules(harness: Harness) -> RuleContracts:
    return await deploy_rule_contracts(harness)


@asynccontextmanager
async def bundler_in(
    devnet: Devnet, url: str, eth: EthClient, mode: ValidationMode | None
) -> AsyncIterator[RpcClient]:
    """A manual-mode bundler on `url`, in `mode` (None: the node's strongest)."""
    executor = Harness.new_key()
    await eth.rpc.request("anvil_setBalance", [executor.address, hex(1000 * ETHER)])
    async with JsonRpcClient(url) as rpc:
        settings = StandaloneSettings(
            rpc_url=url,
            entry_point=devnet.chains[0].deployment.entry_point,
            executor_keys=(executor,),
            debug_rpc=True,
            mode=BundlingMode.MANUAL,
            validation_mode=mode,
            also_entry_points=(),
        )
        bundler: BundlerRpc = await build_bundler(EthClient(rpc), settings)
        await bundler.start()
        try:
            yield RpcClient(bundler, bundler.bundler.config.entry_point)
        finally:
            await bundler.stop()


@pytest.fixture(scope="module")
async def calls_client(devnet: Devnet, eth: EthClient) -> AsyncIterator[RpcClient]:
    async with bundler_in(devnet, devnet.chains[0].rpc_url, eth, ValidationMode.CALLS) as client:
        assert client.rpc.bundler.validator.mode is ValidationMode.CALLS
        yield client


@pytest.fixture(scope="module")
async def native_client(devnet: Devnet, eth: EthClient) -> AsyncIterator[RpcClient]:
    async with (
        node_relay(devnet.chains[0].rpc_url, "geth") as geth,
        bundler_in(devnet, geth.url, eth, None) as client,
    ):
        assert client.rpc.bundler.validator.mode is ValidationMode.NATIVE  # probed, not pinned
        yield client


async def _judged(client: RpcClient, rules: RuleContracts, case: Case) -> None:
    client.rpc.bundler.clear()
    op = await _op(rules, case)
    if case.expected is None:
        assert await client.send(op)
        return
    error = await client.send_error(op)
    assert error["code"] == BANNED, error
    assert str(error["message"]).startswith(case.entity), error
    assert error["data"] == {"rule": case.expected}, error


@pytest.mark.parametrize("case", CLAIMED, ids=[c.id for c in CLAIMED])
async def test_calls_mode_refuses_what_it_claims_and_accepts_the_rest(
    calls_client: RpcClient, rules: RuleContracts, case: Case
) -> None:
    await _judged(calls_client, rules, case)


@pytest.mark.parametrize("case", CASES, ids=[c.id.rsplit("-", 1)[0] for c in CASES])
async def test_native_mode_refuses_every_case_and_accepts_the_rest(
    native_client: RpcClient, rules: RuleContracts, case: Case
) -> None:
    await _judged(native_client, rules, case)
