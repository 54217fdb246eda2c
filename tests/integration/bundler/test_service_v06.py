"""EntryPoint v0.6 served beside v0.8 and v0.7 by one bundler: a v0.6 op in its own JSON shape
sent, its hash v0.6's, shown pending and then mined in v0.6's shape, bundled by v0.6's
`handleOps` with a receipt; its gas estimated by v0.6's simulation and enough to be bundled,
for a new account and for a deployed one paying its own prefund and sending value; an op in
the v0.7 shape refused for v0.6."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest

from entryway import contracts
from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.standalone import StandaloneSettings, build_bundler
from entryway.bundler.states import BundlingMode
from entryway.chain.rpc import EthClient
from entryway.devnet.devnet import Devnet
from entryway.domain.entry_points import V06, V07, V08, V09
from entryway.domain.evm import hex_to_bytes
from entryway.domain.userop_v06 import op_v06_to_json, user_op_hash_v06
from tests.integration.harness import ETHER, Harness
from tests.integration.v06_ops import first_op, sign


@pytest.fixture(scope="module")
async def served(devnet: Devnet, eth: EthClient) -> AsyncIterator[BundlerRpc]:
    executor = Harness.new_key()
    await eth.rpc.request("anvil_setBalance", [executor.address, hex(1000 * ETHER)])
    rpc = await build_bundler(
        eth,
        StandaloneSettings(
            rpc_url=devnet.chains[0].rpc_url,
            entry_point=V08.address,
            executor_keys=(executor,),
            debug_rpc=True,
            mode=BundlingMode.MANUAL,
        ),
    )
    await rpc.start()
    yield rpc
    await rpc.stop()


async def answer(rpc: BundlerRpc, method: str, *params: Any) -> dict[str, Any]:
    reply = await rpc.dispatch({"jsonrpc": "2.0", "id": 1, "method": method, "params": [*params]})
    assert reply is not None
    return reply


async def call(rpc: BundlerRpc, method: str, *params: Any) -> Any:
    reply = await answer(rpc, method, *params)
    assert "error" not in reply, reply
    return reply["result"]


async def test_v06_is_served_after_v08_and_v07(served: BundlerRpc) -> None:
    assert await call(served, "eth_supportedEntryPoints") == [
        V08.address,
        V07.address,
        V09.packaged_address,  # the devnet's v0.9 (docs/devnets.md)
        V06.address,
    ]


async def test_a_v06_op_is_sent_bundled_and_found(served: BundlerRpc, harness: Harness) -> None:
    op, _ = await first_op(harness)
    sent = await call(served, "eth_sendUserOperation", op_v06_to_json(op), V06.address)
    assert hex_to_bytes(sent) == user_op_hash_v06(op, V06.address, harness.chain_id)
    pending = await call(served, "eth_getUserOperationByHash", sent)
    assert pending["userOperation"] == op_v06_to_json(op)
    assert pending["entryPoint"] == V06.address and pending["transactionHash"] is None
    await call(served, "debug_bundler_sendBundleNow")
    receipt = await call(served, "eth_getUserOperationReceipt", sent)
    assert receipt["success"] is True
    assert receipt["entryPoint"] == V06.address
    assert receipt["sender"].lower() == op.sender.lower()
    assert await harness.eth.get_code(op.sender)
    mined = await call(served, "eth_getUserOperationByHash", sent)
    assert mined["userOperation"] == op_v06_to_json(op)
    assert mined["transactionHash"] == receipt["receipt"]["transactionHash"]
    status = await call(served, "entryway_getUserOperationStatus", sent)
    assert status["status"] == "included"


async def test_a_v07_shaped_op_is_refused_for_v06(served: BundlerRpc, harness: Harness) -> None:
    op, _ = await first_op(harness)
    shaped = op_v06_to_json(op)
    del shaped["initCode"]
    shaped["factory"] = "0x" + op.init_code[:20].hex()
    reply = await answer(served, "eth_sendUserOperation", shaped, V06.address)
    assert reply["error"]["code"] == -32602
    assert "initCode" in reply["error"]["message"]


async def test_v06_gas_estimate_is_enough_to_bundle(served: BundlerRpc, harness: Harness) -> None:
    op, owner = await first_op(harness, b"")
    unsized = replace(op, call_gas_limit=0, verification_gas_limit=0, pre_verification_gas=0)
    estimate = await call(
        served, "eth_estimateUserOperationGas", op_v06_to_json(unsized), V06.address
    )
    assert set(estimate) == {"preVerificationGas", "verificationGasLimit", "callGasLimit"}
    sized = sign(
        harness,
        replace(
            op,
            call_gas_limit=int(estimate["callGasLimit"], 16),
            verification_gas_limit=int(estimate["verificationGasLimit"], 16),
            pre_verification_gas=int(estimate["preVerificationGas"], 16),
        ),
        owner,
    )
    assert sized.verification_gas_limit < op.verification_gas_limit  # measured, not defaulted
    sent = await call(served, "eth_sendUserOperation", op_v06_to_json(sized), V06.address)
    await call(served, "debug_bundler_sendBundleNow")
    receipt = await call(served, "eth_getUserOperationReceipt", sent)
    assert receipt["success"] is True


async def test_v06_estimate_of_a_reverting_call_is_refused(
    served: BundlerRpc, harness: Harness
) -> None:
    op, _ = await first_op(harness)
    await call(served, "eth_sendUserOperation", op_v06_to_json(op), V06.address)
    await call(served, "debug_bundler_sendBundleNow")
    assert await harness.eth.get_code(op.sender)
    # No such function on v0.6's SimpleAccount: its call reverts.
    second = replace(op, nonce=1, init_code=b"", call_data=bytes.fromhex("deadbeef"))
    reply = await answer(
        served, "eth_estimateUserOperationGas", op_v06_to_json(second), V06.address
    )
    assert reply["error"]["code"] == -32521, reply
    assert "execution reverted" in reply["error"]["message"]


async def test_v06_estimate_covers_a_deployed_self_paying_accounts_value_call(
    served: BundlerRpc, harness: Harness
) -> None:
    """A deployed account with no deposit pays its prefund during validation, and a call
    carrying value to a new address needs more gas than it uses (the stipend handed out and
    given back): the estimate covers both, and the op succeeds with it."""
    op, owner = await first_op(harness)
    await call(served, "eth_sendUserOperation", op_v06_to_json(op), V06.address)
    await call(served, "debug_bundler_sendBundleNow")
    recipient = Harness.new_key().address
    execute = contracts.load("SimpleAccountV06").abi.encode_call("execute", recipient, 7, b"")
    unsized = replace(
        op,
        nonce=1,
        init_code=b"",
        call_data=execute,
        call_gas_limit=0,
        verification_gas_limit=0,
        pre_verification_gas=0,
    )
    estimate = await call(
        served, "eth_estimateUserOperationGas", op_v06_to_json(unsized), V06.address
    )
    sized = sign(
        harness,
        replace(
            unsized,
            call_gas_limit=int(estimate["callGasLimit"], 16),
            verification_gas_limit=int(estimate["verificationGasLimit"], 16),
            pre_verification_gas=int(estimate["preVerificationGas"], 16),
        ),
        owner,
    )
    sent = await call(served, "eth_sendUserOperation", op_v06_to_json(sized), V06.address)
    await call(served, "debug_bundler_sendBundleNow")
    receipt = await call(served, "eth_getUserOperationReceipt", sent)
    assert receipt["success"] is True, receipt
    assert await harness.eth.get_balance(recipient) == 7
