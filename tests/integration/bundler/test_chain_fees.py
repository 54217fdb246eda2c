"""Chain fee rules in the bundler: the OP-stack L1 data fee folded into preVerificationGas
(Base), and Polygon's minimum priority fee."""

from __future__ import annotations

from dataclasses import replace

from entryway import contracts
from entryway.bundler.rpc_types import user_operation_json
from entryway.bundler.standalone import StandaloneSettings, build_bundler
from entryway.bundler.states import BundlingMode
from entryway.devnet.devnet import Devnet
from tests.integration.bundler.conftest import RpcClient
from tests.integration.bundler.rules_setup import deploy
from tests.integration.harness import ETHER, Harness

ORACLE = contracts.load("TestGasPriceOracle").abi
WEI_PER_BYTE = 10**13  # an L1 expensive enough to show: ~100,000 gas for a small op


async def test_l1_data_fee_raises_the_required_pre_verification_gas(
    devnet: Devnet, harness: Harness
) -> None:
    oracle = await deploy(harness, "TestGasPriceOracle")
    await harness.executor.send(oracle, ORACLE.encode_call("setWeiPerByte", WEI_PER_BYTE))
    executor = Harness.new_key()
    await harness.fund(executor.address, 100 * ETHER)
    rpc = await build_bundler(
        harness.eth,
        StandaloneSettings(
            rpc_url=devnet.chains[0].rpc_url,
            entry_point=harness.deployment.entry_point,
            executor_keys=(executor,),
            debug_rpc=True,
            mode=BundlingMode.MANUAL,
            l1_fee_oracle=oracle,
        ),
    )
    client = RpcClient(rpc, harness.deployment.entry_point)
    owner = harness.new_key()
    draft = harness.sign(harness.sponsor(await harness.build_op(owner.address, b"")), owner)

    error = await client.send_error(draft)  # 60,000 covers calldata but not L1 posting
    assert error["code"] == -32602 and "preVerificationGas" in error["message"]

    estimate = await client.result(
        "eth_estimateUserOperationGas", user_operation_json(draft), client.entry_point
    )
    pvg = int(estimate["preVerificationGas"], 16)
    l1_gas = await rpc.bundler.l1_fees.gas(draft)  # type: ignore[union-attr]
    # The L1 fee in gas follows the op's fee per gas, which follows the devnet's base fee
    # (shared, and higher under load): no fixed figure, but the estimate covers it and more
    # than the draft's 60,000, which the send refused.
    assert l1_gas > 0 and pvg > l1_gas
    assert pvg > draft.pre_verification_gas
    paid = harness.sign(harness.sponsor(replace(draft, pre_verification_gas=pvg)), owner)
    assert await client.send(paid)


async def test_polygon_minimum_priority_fee_is_enforced(
    client: RpcClient, harness: Harness
) -> None:
    assert harness.chain_id == 80002
    owner = harness.new_key()
    op = await harness.build_op(owner.address, b"")
    cheap = harness.sign(harness.sponsor(replace(op, max_priority_fee_per_gas=10**9)), owner)
    error = await client.send_error(cheap)
    assert error["code"] == -32602 and "25000000000" in error["message"]
