"""Mempool rules through the bundler: replacement, per-sender limits, reputation, and one
bundle of many ops from many senders (SimpleAccount among them) mined with correct receipts."""

from __future__ import annotations

from dataclasses import replace

from entryway import contracts
from entryway.bundler.rpc_types import user_operation_json
from entryway.deploy.deployer import ContractDeployer
from entryway.deploy.plan import ENTRYWAY_SALT, plan_contract
from entryway.domain.evm import address_bytes
from entryway.domain.userop import UserOperation
from tests.integration.bundler.conftest import RpcClient
from tests.integration.harness import ETHER, Harness

SIMPLE_FACTORY = contracts.load("SimpleAccountFactory")


def bumped(op: UserOperation, percent: int) -> UserOperation:
    return replace(
        op,
        max_fee_per_gas=op.max_fee_per_gas * (100 + percent) // 100,
        max_priority_fee_per_gas=op.max_priority_fee_per_gas * (100 + percent) // 100,
    )


async def test_replacement_needs_ten_percent_more_on_both_fees(
    client: RpcClient, harness: Harness
) -> None:
    owner = harness.new_key()
    first = harness.sign(harness.sponsor(await harness.build_op(owner.address, b"")), owner)
    await client.send(first)
    for too_little in (
        bumped(first, 5),
        replace(bumped(first, 20), max_priority_fee_per_gas=first.max_priority_fee_per_gas),
    ):
        error = await client.send_error(harness.sign(harness.sponsor(too_little), owner))
        assert error["code"] == -32602 and "10%" in error["message"]
    second = harness.sign(harness.sponsor(bumped(first, 10)), owner)
    second_hash = await client.send(second)
    pool = await client.result("debug_bundler_dumpMempool", client.entry_point)
    assert [int(op["maxFeePerGas"], 16) for op in pool] == [second.max_fee_per_gas]
    await client.bundle()
    assert (await client.result("eth_getUserOperationReceipt", second_hash))["success"]


async def test_an_unstaked_sender_may_have_four_ops_pending(
    client: RpcClient, harness: Harness
) -> None:
    owner = harness.new_key()
    deploy = harness.sign(harness.sponsor(await harness.build_op(owner.address, b"")), owner)
    await client.send(deploy)
    await client.bundle()
    sender = deploy.sender
    ops = []
    for key in range(1, 6):  # distinct nonce keys, so all five are valid at once
        op = await harness.build_op(owner.address, b"", sender=sender, nonce=key << 64)
        ops.append(harness.sign(harness.sponsor(op), owner))
    for op in ops[:4]:
        await client.send(op)
    error = await client.send_error(ops[4])  # UREP-010: it needs stake for a fifth
    assert error["code"] == -32505
    assert f"unstaked sender {sender}" in error["message"] and "4" in error["message"]


async def test_a_throttled_sender_is_refused_as_throttled(
    client: RpcClient, harness: Harness
) -> None:
    """SREP-030: a throttled sender's fifth op is refused for its reputation (-32504), before
    the unstaked sender's count, which falls at the same fifth op, is looked at."""
    owner = harness.new_key()
    deploy = harness.sign(harness.sponsor(await harness.build_op(owner.address, b"")), owner)
    await client.send(deploy)
    await client.bundle()
    sender = deploy.sender
    throttled = [{"address": sender, "opsSeen": 120, "opsIncluded": 1}]  # 12 > 1 + 10
    await client.result("debug_bundler_setReputation", throttled, client.entry_point)
    for key in range(1, 5):
        op = await harness.build_op(owner.address, b"", sender=sender, nonce=key << 64)
        await client.send(harness.sign(harness.sponsor(op), owner))
    op = await harness.build_op(owner.address, b"", sender=sender, nonce=5 << 64)
    error = await client.send_error(harness.sign(harness.sponsor(op), owner))
    assert error["code"] == -32504 and f"sender {sender} is throttled" in error["message"]


async def test_an_unstaked_factory_has_the_allowance_its_inclusions_earn(
    client: RpcClient, harness: Harness
) -> None:
    """UREP-020 for a factory, with the conformance suite's numbers: one op included of ten
    seen leaves room for eleven first-time accounts through the unstaked factory (10 +
    floor(1/11 * 10) + 1 once the first is seen); the twelfth needs stake (-32505)."""
    factory = harness.deployment.account_factory
    earned = [{"address": factory, "opsSeen": 10, "opsIncluded": 1}]
    await client.result("debug_bundler_setReputation", earned, client.entry_point)
    for _ in range(11):
        owner = harness.new_key()
        await client.send(
            harness.sign(harness.sponsor(await harness.build_op(owner.address, b"")), owner)
        )
    owner = harness.new_key()
    op = harness.sign(harness.sponsor(await harness.build_op(owner.address, b"")), owner)
    assert op.factory == factory
    error = await client.send_error(op)
    assert error["code"] == -32505 and f"unstaked factory {factory}" in error["message"]
    pool = await client.result("debug_bundler_dumpMempool", client.entry_point)
    assert len(pool) == 11


async def test_banned_and_throttled_paymasters(client: RpcClient, harness: Harness) -> None:
    pm = harness.deployment.paymaster
    banned = [{"address": pm, "opsSeen": 1000, "opsIncluded": 0}]
    await client.result("debug_bundler_setReputation", banned, client.entry_point)
    assert (await client.result("debug_bundler_dumpReputation", client.entry_point))[0][
        "status"
    ] == 2
    owner = harness.new_key()
    op = harness.sign(harness.sponsor(await harness.build_op(owner.address, b"")), owner)
    error = await client.send_error(op)
    assert error["code"] == -32504 and "banned" in error["message"]

    throttled = [{"address": pm, "opsSeen": 200, "opsIncluded": 0}]  # 200/10 > 0 + 10, not > 50
    await client.result("debug_bundler_setReputation", throttled, client.entry_point)
    assert (await client.result("debug_bundler_dumpReputation", client.entry_point))[0][
        "status"
    ] == 1
    accepted = 0
    for _ in range(5):
        owner = harness.new_key()
        op = harness.sign(harness.sponsor(await harness.build_op(owner.address, b"")), owner)
        response = await client.call(
            "eth_sendUserOperation", user_operation_json(op), client.entry_point
        )
        if "result" in response:
            accepted += 1
        else:
            assert (
                response["error"]["code"] == -32504 and "throttled" in response["error"]["message"]
            )
    assert accepted == 4  # THROTTLED_ENTITY_MEMPOOL_COUNT


async def test_a_sender_cannot_also_be_a_paymaster_in_the_mempool(
    client: RpcClient, harness: Harness
) -> None:
    owner = harness.new_key()
    op = harness.sign(harness.sponsor(await harness.build_op(owner.address, b"")), owner)
    await client.send(op)
    other = harness.new_key()
    # An op naming the first op's sender as its paymaster.
    draft = await harness.build_op(other.address, b"")
    posing = harness.sign(draft.with_paymaster(op.sender, 60_000, 0, b""), other)
    error = await client.send_error(posing)
    assert error["code"] == -32502 and "sender entity" in error["message"]


async def simple_account_factory(harness: Harness) -> str:
    init = SIMPLE_FACTORY.bytecode + bytes(12) + address_bytes(harness.deployment.entry_point)
    plan = plan_contract("simpleAccountFactory", "SimpleAccountFactory", ENTRYWAY_SALT, init)
    await ContractDeployer(harness.eth, harness.executor).ensure(plan)
    return plan.address


async def test_many_ops_from_many_senders_in_one_bundle(
    client: RpcClient, harness: Harness
) -> None:
    simple = await simple_account_factory(harness)
    hashes = {}
    for i in range(16):
        owner = harness.new_key()
        # Half of them through each factory: an unstaked factory may have ten first-time
        # accounts pending (UREP-020).
        if i % 2 == 0:  # SimpleAccount from the EntryPoint release, paying for itself
            op = await harness.build_op(
                owner.address,
                b"",
                factory_address=simple,
                factory_abi=SIMPLE_FACTORY.abi,
                verification_gas=400_000,
                call_gas=50_000,
            )
            await harness.fund(op.sender, ETHER)
        else:
            draft = await harness.build_op(
                owner.address, b"", verification_gas=400_000, call_gas=50_000
            )
            op = harness.sponsor(draft)
        op = harness.sign(op, owner)
        hashes[await client.send(op)] = op
    tx_hash = await client.bundle()
    assert await client.result("debug_bundler_dumpMempool", client.entry_point) == []
    for op_hash, op in hashes.items():
        receipt = await client.result("eth_getUserOperationReceipt", op_hash)
        assert receipt["success"] is True and receipt["sender"] == op.sender
        assert receipt["receipt"]["transactionHash"] == tx_hash
        assert await harness.eth.get_code(op.sender) != b""
