"""The bundler's JSON-RPC methods, success and error paths, on a real anvil."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from entryway.bundler.gas.estimation import MAX_VERIFICATION_GAS
from entryway.bundler.rpc_types import user_operation_json
from entryway.domain.entry_points import V06, V07, V09
from entryway.domain.userop import UserOperation
from tests.integration.bundler.conftest import RpcClient
from tests.integration.harness import ACCOUNT, COUNTER, EP, ETHER, Harness

INVALID_PARAMS = -32602


async def sponsored_op(h: Harness, call_data: bytes = b"", **kw: object) -> UserOperation:
    owner = h.new_key()
    op = h.sponsor(await h.build_op(owner.address, call_data, **kw))  # type: ignore[arg-type]
    return h.sign(op, owner)


async def test_chain_id_and_entry_points(client: RpcClient, harness: Harness) -> None:
    assert await client.result("eth_chainId") == hex(harness.chain_id)
    assert await client.result("eth_supportedEntryPoints") == [
        harness.deployment.entry_point,
        V07.address,  # the devnet carries v0.7 too; the bundler serves each EntryPoint found
        V09.packaged_address,  # and v0.9 (its release candidate, docs/devnets.md)
        V06.address,  # and v0.6
    ]


async def test_send_then_bundle_then_receipt(client: RpcClient, harness: Harness) -> None:
    op = await sponsored_op(harness)
    op_hash = await client.send(op)
    assert op_hash == "0x" + (await harness.on_chain_hash(op)).hex()
    assert await client.result("debug_bundler_dumpMempool", client.entry_point) == [
        user_operation_json(op)
    ]
    pending = await client.result("eth_getUserOperationByHash", op_hash)
    assert pending["blockNumber"] is None and pending["userOperation"] == user_operation_json(op)
    assert (await client.result("entryway_getUserOperationStatus", op_hash))["status"] == "pending"

    tx_hash = await client.bundle()

    receipt = await client.result("eth_getUserOperationReceipt", op_hash)
    assert receipt["success"] is True and receipt["sender"] == op.sender
    assert receipt["paymaster"] == harness.deployment.paymaster
    assert receipt["receipt"]["transactionHash"] == tx_hash
    assert int(receipt["actualGasUsed"], 16) > 0
    mined = await client.result("eth_getUserOperationByHash", op_hash)
    assert mined["transactionHash"] == tx_hash and mined["entryPoint"] == client.entry_point
    assert mined["userOperation"] == user_operation_json(op)
    status = await client.result("entryway_getUserOperationStatus", op_hash)
    assert status == {"status": "included", "transactionHash": tx_hash, "confirmations": "0x1"}
    assert await client.result("debug_bundler_dumpMempool", client.entry_point) == []


async def test_receipt_carries_the_ops_own_logs_and_revert_reason(
    client: RpcClient, harness: Harness
) -> None:
    from tests.integration.test_smart_account import deploy_counter

    counter = await deploy_counter(harness)
    ok = await sponsored_op(
        harness, ACCOUNT.encode_call("execute", counter, 0, COUNTER.encode_call("count"))
    )
    bad = await sponsored_op(
        harness, ACCOUNT.encode_call("execute", counter, 0, COUNTER.encode_call("fail", "nope"))
    )
    ok_hash, bad_hash = await client.send(ok), await client.send(bad)
    await client.bundle()
    ok_receipt = await client.result("eth_getUserOperationReceipt", ok_hash)
    assert [log["address"].lower() for log in ok_receipt["logs"]] == [counter.lower()]
    bad_receipt = await client.result("eth_getUserOperationReceipt", bad_hash)
    assert bad_receipt["success"] is False
    assert COUNTER.decode_error(bytes.fromhex(bad_receipt["reason"][2:])).args == ("nope",)
    status = await client.result("entryway_getUserOperationStatus", bad_hash)
    assert status["status"] == "failed"


async def test_unknown_hashes_give_null_and_bad_ones_an_error(client: RpcClient) -> None:
    unknown = "0x" + "ab" * 32
    assert await client.result("eth_getUserOperationReceipt", unknown) is None
    assert await client.result("eth_getUserOperationByHash", unknown) is None
    assert (await client.result("entryway_getUserOperationStatus", unknown))[
        "status"
    ] == "not_found"
    for method in ("eth_getUserOperationReceipt", "eth_getUserOperationByHash"):
        for bad in ("", "0x1234", 5):
            error = await client.error(method, bad)
            assert error["code"] == INVALID_PARAMS and "invalid userOpHash" in error["message"]


@pytest.mark.parametrize(
    ("mutate", "code", "fragment"),
    [
        (lambda j: {**j, "sender": "0x1234"}, INVALID_PARAMS, "sender"),
        (lambda j: {**j, "nonce": "12"}, INVALID_PARAMS, "nonce"),
        (lambda j: {**j, "nonce": int(j["nonce"], 16)}, INVALID_PARAMS, "nonce: expected a hex"),
        (lambda j: {**j, "callGasLimit": True}, INVALID_PARAMS, "callGasLimit: expected a hex"),
        (lambda j: {k: v for k, v in j.items() if k != "callData"}, INVALID_PARAMS, "callData"),
        (lambda j: {**j, "callGasLimit": hex(2**128)}, INVALID_PARAMS, "out of range"),
        (
            lambda j: {**j, "maxPriorityFeePerGas": hex(int(j["maxFeePerGas"], 16) + 1)},
            INVALID_PARAMS,
            "maxPriorityFeePerGas",
        ),
        (
            lambda j: {**j, "verificationGasLimit": hex(50_000_000)},
            INVALID_PARAMS,
            "verificationGasLimit",
        ),
        (lambda j: {**j, "signature": "0x" + "00" * 65}, -32507, "signature"),
    ],
)
async def test_bad_ops_are_rejected_with_their_code(
    client: RpcClient, harness: Harness, mutate: object, code: int, fragment: str
) -> None:
    op = await sponsored_op(harness)
    raw = mutate(user_operation_json(op))  # type: ignore[operator]
    error = await client.error("eth_sendUserOperation", raw, client.entry_point)
    assert error["code"] == code, error
    assert fragment in error["message"], error
    assert await client.result("debug_bundler_dumpMempool", client.entry_point) == []


async def test_undeployed_sender_without_factory_is_rejected(
    client: RpcClient, harness: Harness
) -> None:
    from dataclasses import replace

    op = await sponsored_op(harness)
    error = await client.send_error(replace(op, factory=None, factory_data=b""))
    assert error["code"] == -32500 and "AA20" in error["message"]


async def test_too_little_pre_verification_gas_is_refused(
    client: RpcClient, harness: Harness
) -> None:
    owner = harness.new_key()
    op = harness.sponsor(await harness.build_op(owner.address, b""))
    from dataclasses import replace

    op = harness.sign(harness.sponsor(replace(op, pre_verification_gas=30_000)), owner)
    error = await client.send_error(op)
    assert error["code"] == INVALID_PARAMS and "preVerificationGas" in error["message"]


async def test_bad_paymaster_signature_is_an_invalid_signature(
    client: RpcClient, harness: Harness
) -> None:
    owner = harness.new_key()
    op = harness.sponsor(await harness.build_op(owner.address, b""), tamper=True)
    error = await client.send_error(harness.sign(op, owner))
    assert error == {"code": -32507, "message": "Invalid paymaster signature"}


async def test_unsupported_entry_point_and_unknown_method(
    client: RpcClient, harness: Harness
) -> None:
    op = await sponsored_op(harness)
    error = await client.error(
        "eth_sendUserOperation",
        user_operation_json(op),
        "0x" + "12" * 20,  # no EntryPoint this bundler serves
    )
    assert error["code"] == INVALID_PARAMS and "unsupported EntryPoint" in error["message"]
    assert (await client.error("eth_noSuchMethod"))["code"] == -32601
    response = await client.rpc.dispatch({"id": 1, "method": "eth_chainId"})
    assert response is not None and response["error"]["code"] == -32600


async def test_expired_sponsorship_is_a_short_deadline(client: RpcClient, harness: Harness) -> None:
    owner = harness.new_key()
    now = await harness.latest_timestamp()
    op = harness.sponsor(await harness.build_op(owner.address, b""), valid_until=now + 5)
    error = await client.send_error(harness.sign(op, owner))
    assert error["code"] == -32503


async def test_estimate_gives_limits_that_get_the_op_included(
    client: RpcClient, harness: Harness
) -> None:
    from dataclasses import replace

    from tests.integration.test_smart_account import deploy_counter

    counter = await deploy_counter(harness)
    owner = harness.new_key()
    call = ACCOUNT.encode_call("execute", counter, 0, COUNTER.encode_call("count"))
    draft = harness.sign(harness.sponsor(await harness.build_op(owner.address, call)), owner)
    estimate = await client.result(
        "eth_estimateUserOperationGas", user_operation_json(draft), client.entry_point
    )
    sized = replace(
        draft,
        pre_verification_gas=int(estimate["preVerificationGas"], 16),
        verification_gas_limit=int(estimate["verificationGasLimit"], 16),
        call_gas_limit=int(estimate["callGasLimit"], 16),
    )
    assert sized.verification_gas_limit < draft.verification_gas_limit
    assert 20_000 < sized.call_gas_limit < draft.call_gas_limit
    final = harness.sign(harness.sponsor(sized), owner)
    op_hash = await client.send(final)
    await client.bundle()
    receipt = await client.result("eth_getUserOperationReceipt", op_hash)
    assert receipt["success"] is True
    assert await harness.call(counter, COUNTER, "counts", final.sender) == 1


async def test_an_unsized_self_paying_op_is_estimated_enough_to_be_accepted(
    client: RpcClient, harness: Harness
) -> None:
    """A client estimating with preVerificationGas and fees still 0, for a counterfactual
    account that pays its own prefund (and so creates its EntryPoint deposit during
    validation): the estimate must cover the op as finally sent."""
    from dataclasses import replace

    owner = harness.new_key()
    draft = await harness.build_op(owner.address, b"")
    await harness.fund(draft.sender, ETHER)
    unsized = replace(
        draft,
        pre_verification_gas=0,
        verification_gas_limit=0,
        call_gas_limit=0,
        max_fee_per_gas=0,
        max_priority_fee_per_gas=0,
    )
    estimate = await client.result(
        "eth_estimateUserOperationGas",
        user_operation_json(harness.sign(unsized, owner)),
        client.entry_point,
    )
    sized = replace(
        draft,
        pre_verification_gas=int(estimate["preVerificationGas"], 16),
        verification_gas_limit=int(estimate["verificationGasLimit"], 16),
        call_gas_limit=int(estimate["callGasLimit"], 16),
    )
    op_hash = await client.send(harness.sign(sized, owner))
    await client.bundle()
    receipt = await client.result("eth_getUserOperationReceipt", op_hash)
    assert receipt["success"] is True


async def test_a_deployed_account_with_a_small_deposit_is_estimated_enough(
    client: RpcClient, harness: Harness
) -> None:
    """An account whose EntryPoint deposit covers the prefund of the estimate's probes
    (placeholder fees, no call gas) but not the prefund of the op as sent: the sent op's
    validation transfers the difference, and the estimate must cover that."""
    from dataclasses import replace

    owner = harness.new_key()
    first = await harness.build_op(owner.address, b"")
    await harness.fund(first.sender, ETHER)
    await client.send(harness.sign(first, owner))
    await client.bundle()
    assert await harness.eth.get_code(first.sender)
    ep = client.entry_point
    draft = await harness.build_op(owner.address, b"")
    assert draft.factory is None
    unsized = replace(
        draft, pre_verification_gas=0, verification_gas_limit=0, call_gas_limit=0,
        max_fee_per_gas=0, max_priority_fee_per_gas=0,
    )  # fmt: skip
    estimate = await client.result(
        "eth_estimateUserOperationGas", user_operation_json(harness.sign(unsized, owner)), ep
    )
    sized = replace(
        draft,
        pre_verification_gas=int(estimate["preVerificationGas"], 16),
        verification_gas_limit=int(estimate["verificationGasLimit"], 16),
        call_gas_limit=int(estimate["callGasLimit"], 16),
    )
    # The first op left a deposit; a fee high enough that, as sent, the prefund exceeds it:
    # validation pays the difference (the estimate's probes, at 1 gwei, needed no payment).
    deposit = int(await harness.call(ep, EP, "balanceOf", sized.sender))
    gas = sized.verification_gas_limit + sized.call_gas_limit + sized.pre_verification_gas
    assert deposit > 2 * MAX_VERIFICATION_GAS * 10**9
    sized = replace(sized, max_fee_per_gas=max(sized.max_fee_per_gas, 2 * deposit // gas))
    op_hash = await client.send(harness.sign(sized, owner))
    await client.bundle()
    receipt = await client.result("eth_getUserOperationReceipt", op_hash)
    assert receipt["success"] is True


async def test_estimate_reports_a_reverting_call(client: RpcClient, harness: Harness) -> None:
    from tests.integration.test_smart_account import deploy_counter

    counter = await deploy_counter(harness)
    owner = harness.new_key()
    call = ACCOUNT.encode_call("execute", counter, 0, COUNTER.encode_call("fail", "no"))
    draft = harness.sign(harness.sponsor(await harness.build_op(owner.address, call)), owner)
    error = await client.error(
        "eth_estimateUserOperationGas", user_operation_json(draft), client.entry_point
    )
    assert error["code"] == -32521
    revert = bytes.fromhex(error["data"]["revertData"][2:])
    assert COUNTER.decode_error(revert).args == ("no",)


async def test_gas_price_tiers_are_ordered(client: RpcClient) -> None:
    tiers = await client.result("entryway_getUserOperationGasPrice")
    fees = [int(tiers[t]["maxFeePerGas"], 16) for t in ("slow", "standard", "fast")]
    tips = [int(tiers[t]["maxPriorityFeePerGas"], 16) for t in ("slow", "standard", "fast")]
    assert fees == sorted(fees) and tips == sorted(tips) and fees[0] > tips[0] > 0


async def test_debug_namespace(client: RpcClient, harness: Harness) -> None:
    assert await client.result("debug_bundler_setBundlingMode", "manual") == "ok"
    assert (await client.error("debug_bundler_setBundlingMode", "sometimes"))[
        "code"
    ] == INVALID_PARAMS
    assert await client.result("debug_bundler_sendBundleNow") == "ok"  # nothing to bundle
    pm = harness.deployment.paymaster
    assert (
        await client.result(
            "debug_bundler_setReputation",
            [{"address": pm, "opsSeen": "0x14", "opsIncluded": 3}],
            client.entry_point,
        )
        == "ok"
    )
    assert await client.result("debug_bundler_dumpReputation", client.entry_point) == [
        {"address": pm, "opsSeen": 20, "opsIncluded": 3, "status": 0}  # the standard fields
    ]
    stake = await client.result("debug_bundler_getStakeStatus", pm, client.entry_point)
    assert stake == {
        "stakeInfo": {"addr": pm, "stake": 10 * ETHER, "unstakeDelaySec": 86_400},
        "isStaked": True,
    }
    op = await sponsored_op(harness)
    assert (
        await client.result(
            "debug_bundler_addUserOps", [user_operation_json(op)], client.entry_point
        )
        == "ok"
    )
    assert len(await client.result("debug_bundler_dumpMempool", client.entry_point)) == 1
    assert await client.result("debug_bundler_clearMempool") == "ok"
    assert await client.result("debug_bundler_clearReputation") == "ok"
    assert await client.result("debug_bundler_dumpReputation", client.entry_point) == []
    assert await client.result("debug_bundler_clearState") == "ok"


async def test_debug_namespace_is_off_unless_enabled(client: RpcClient) -> None:
    from entryway.bundler.rpc_methods import BundlerRpc

    plain = BundlerRpc(client.rpc.bundler, client.rpc.estimator, debug=False)
    response = await plain.dispatch(
        {"jsonrpc": "2.0", "id": 1, "method": "debug_bundler_clearState", "params": []}
    )
    assert response is not None and response["error"]["code"] == -32601


async def test_a_receipt_disappears_with_its_block(client: RpcClient, harness: Harness) -> None:
    snapshot = await harness.eth.rpc.request("evm_snapshot", [])
    op = await sponsored_op(harness)
    op_hash = await client.send(op)
    await client.bundle()
    assert (await client.result("eth_getUserOperationReceipt", op_hash))["success"] is True
    assert await harness.eth.rpc.request("evm_revert", [snapshot])  # the block is gone
    assert await client.result("eth_getUserOperationReceipt", op_hash) is None
    assert await client.result("eth_getUserOperationByHash", op_hash) is None
    status = await client.result("entryway_getUserOperationStatus", op_hash)
    assert status["status"] == "pending"  # still valid: sent again (docs/bundler.md, "Reorgs")
    # The executor's nonce follows the chain back: the next bundle is mined, with both ops.
    again = await client.send(await sponsored_op(harness))
    await client.bundle()
    assert (await client.result("eth_getUserOperationReceipt", again))["success"] is True
    assert (await client.result("eth_getUserOperationReceipt", op_hash))["success"] is True


def _node_calls(rpc: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The node calls made through `rpc` from now on: a request by its method, a batch as
    "batch:" and its methods."""
    asked: list[str] = []
    request, batch = rpc.request, rpc.batch

    async def counted_request(method: str, params: Any = None, **kw: Any) -> Any:
        asked.append(method)
        return await request(method, params, **kw)

    async def counted_batch(calls: Any) -> Any:
        asked.append("batch:" + ",".join(method for method, _ in calls))
        return await batch(calls)

    monkeypatch.setattr(rpc, "request", counted_request)
    monkeypatch.setattr(rpc, "batch", counted_batch)
    return asked


async def test_the_ops_of_a_bundle_share_one_read_of_its_receipt(
    client: RpcClient, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = await sponsored_op(harness), await sponsored_op(harness)
    hashes = [await client.send(first), await client.send(second)]
    await client.bundle()
    reader = client.rpc.bundler.receipts
    asked = _node_calls(reader.eth.rpc, monkeypatch)
    polled = await asyncio.gather(
        *(client.result("eth_getUserOperationReceipt", h) for h in hashes)
    )
    assert asked == ["batch:eth_blockNumber,eth_getTransactionReceipt"]
    monkeypatch.undo()
    # The same receipts as the logs give for any op, whoever bundled it.
    from_logs = [await reader.receipt(bytes.fromhex(h[2:])) for h in hashes]
    assert polled == from_logs
    assert [r["userOpHash"] for r in polled] == hashes


async def test_an_op_we_bundled_is_found_by_hash_in_its_bundle_not_the_logs(
    client: RpcClient, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """eth_getUserOperationByHash of an op this bundler sent reads the bundle it was sent in
    (the receipt polls' shared read, and the transaction), as its receipt does: the logs are
    searched only for ops bundled elsewhere, or when the bundle does not hold the op."""
    op = await sponsored_op(harness)
    op_hash = await client.send(op)
    tx_hash = await client.bundle()
    reader = client.rpc.bundler.receipts
    asked = _node_calls(reader.eth.rpc, monkeypatch)
    mined = await client.result("eth_getUserOperationByHash", op_hash)
    assert mined["transactionHash"] == tx_hash
    assert mined["userOperation"] == user_operation_json(op)
    assert "eth_getTransactionByHash" in asked
    assert not any("eth_getLogs" in call for call in asked)

    # The same answer from the logs, as for an op another bundler sent.
    asked.clear()
    assert await reader.user_operation(bytes.fromhex(op_hash[2:])) == mined
    assert any("eth_getLogs" in call for call in asked)
    # A bundle that does not carry the op is not taken for the op's.
    await client.send(await sponsored_op(harness))
    other_tx = await client.bundle()
    assert other_tx != tx_hash
    assert await reader.user_operation_in(bytes.fromhex(op_hash[2:]), other_tx) is None
    assert await reader.user_operation_in(bytes.fromhex(op_hash[2:]), tx_hash) == mined
