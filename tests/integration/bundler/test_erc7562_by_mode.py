"""Each weaker validation mode through the bundler itself, on real anvil: every case of the
ERC-7562 suite whose rule the mode claims (docs/bundler.md, "Validation modes") is refused
by a bundler pinned to that mode for that rule and entity, and the clean and staked cases
are accepted, as the struct logger's bundler (test_erc7562.py) does. The cases it does not
claim are left to test_calls_mode.py, which holds that they are never refused wrongly."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.standalone import StandaloneSettings, build_bundler
from entryway.bundler.states import BundlingMode
from entryway.bundler.validation.modes import ValidationMode
from entryway.chain.rpc import EthClient
from entryway.devnet.devnet import Devnet
from tests.integration.bundler.conftest import RpcClient
from tests.integration.bundler.rules_setup import RuleContracts, deploy_rule_contracts
from tests.integration.bundler.test_calls_mode import CASES, Case, _op
from tests.integration.bundler.test_erc7562 import BANNED
from tests.integration.harness import ETHER, Harness

CLAIMED = [c for c in CASES if c.enforced]


@pytest.fixture(scope="module")
async def rules(harness: Harness) -> RuleContracts:
    return await deploy_rule_contracts(harness)


@pytest.fixture(scope="module")
async def calls_client(devnet: Devnet, eth: EthClient) -> AsyncIterator[RpcClient]:
    executor = Harness.new_key()
    await eth.rpc.request("anvil_setBalance", [executor.address, hex(1000 * ETHER)])
    settings = StandaloneSettings(
        rpc_url=devnet.chains[0].rpc_url,
        entry_point=devnet.chains[0].deployment.entry_point,
        executor_keys=(executor,),
        debug_rpc=True,
        mode=BundlingMode.MANUAL,
        validation_mode=ValidationMode.CALLS,
        also_entry_points=(),
    )
    rpc: BundlerRpc = await build_bundler(eth, settings)
    assert rpc.bundler.validator.mode is ValidationMode.CALLS
    await rpc.start()
    yield RpcClient(rpc, rpc.bundler.config.entry_point)
    await rpc.stop()


@pytest.mark.parametrize("case", CLAIMED, ids=[c.id for c in CLAIMED])
async def test_calls_mode_refuses_what_it_claims_and_accepts_the_rest(
    calls_client: RpcClient, rules: RuleContracts, case: Case
) -> None:
    calls_client.rpc.bundler.clear()
    op = await _op(rules, case)
    if case.expected is None:
        assert await calls_client.send(op)
        return
    error = await calls_client.send_error(op)
    assert error["code"] == BANNED, error
    assert str(error["message"]).startswith(case.entity), error
    assert error["data"] == {"rule": case.expected}, error
