"""EntryPoint v0.6 on the devnet: the npm release's code at the canonical address, the v0.6
userOpHash equal to that EntryPoint's `getUserOpHash`, and a v0.6 SimpleAccount's first op
(initCode through the copied code's SenderCreator) carried by v0.6's `handleOps`."""

from __future__ import annotations

from typing import Any

from entryway import contracts
from entryway.bundler.validation.simulation_v06 import sender_creator_v06
from entryway.chain.rpc import Log
from entryway.deploy.deployer import ContractDeployer
from entryway.deploy.entry_point_v06 import place_entry_point_v06, source_plan
from entryway.devnet.devnet import Devnet
from entryway.domain.entry_points import V06, V07
from entryway.domain.evm import address_bytes, create_address
from entryway.domain.userop_v06 import UserOperationV06, user_op_hash_v06
from tests.integration.harness import Harness
from tests.integration.v06_ops import EP06, first_op


async def on_chain_hash(h: Harness, op: UserOperationV06) -> bytes:
    raw = await h.eth.call(V06.address, EP06.encode_call("getUserOpHash", op.as_tuple()))
    return bytes(EP06.decode_output("getUserOpHash", raw)[0])


def events(logs: tuple[Log, ...], name: str) -> list[dict[str, Any]]:
    topic = EP06.event_topic(name)
    return [
        EP06.decode_event(name, log.topics, log.data)
        for log in logs
        if log.address.lower() == V06.address.lower() and log.topics and log.topics[0] == topic
    ]


async def test_the_devnet_places_the_npm_release_at_the_canonical_address(
    devnet: Devnet, harness: Harness
) -> None:
    code = await harness.eth.get_code(V06.address)
    source = source_plan()
    assert source.address != V06.address  # the npm code cannot land there by itself
    assert code == await harness.eth.get_code(source.address)
    assert contracts.load("EntryPointV06").runtime_matches(code)
    # The copy names the SenderCreator its source's constructor made.
    assert sender_creator_v06(V06.address, code) == create_address(source.address, 1)
    assert await harness.eth.get_code(create_address(source.address, 1))
    assert any(step.startswith("placed EntryPoint v0.6") for step in devnet.chains[0].provisioned)
    # A second start leaves it alone.
    deployer = ContractDeployer(harness.eth, harness.executor)
    assert await place_entry_point_v06(harness.eth.rpc, deployer) == []


async def test_v06_hash_is_the_entry_points(harness: Harness) -> None:
    op, _ = await first_op(harness, b"\x12\x34")
    assert user_op_hash_v06(op, V06.address, harness.chain_id) == await on_chain_hash(harness, op)
    sponsored = op.with_paymaster_and_data(address_bytes(V07.address) + b"\xaa" * 45)
    assert user_op_hash_v06(sponsored, V06.address, harness.chain_id) == await on_chain_hash(
        harness, sponsored
    )
    # The signature is not hashed; every other field is.
    assert user_op_hash_v06(op.with_signature(b""), V06.address, harness.chain_id) == (
        user_op_hash_v06(op, V06.address, harness.chain_id)
    )
    assert user_op_hash_v06(op, V06.address, harness.chain_id + 1) != await on_chain_hash(
        harness, op
    )


async def test_v06_simple_account_op_carried_by_handle_ops(harness: Harness) -> None:
    op, _ = await first_op(harness)
    assert not await harness.eth.get_code(op.sender)
    beneficiary = harness.new_key().address
    receipt = await harness.executor.send(
        V06.address, EP06.encode_call("handleOps", [op.as_tuple()], beneficiary)
    )
    assert await harness.eth.get_code(op.sender)  # deployed through the SenderCreator
    (event,) = events(receipt.logs, "UserOperationEvent")
    assert bytes(event["userOpHash"]) == user_op_hash_v06(op, V06.address, harness.chain_id)
    assert event["sender"].lower() == op.sender.lower()
    assert event["success"] is True
    assert 0 < event["actualGasCost"] <= op.required_prefund
    assert await harness.eth.get_balance(beneficiary) == event["actualGasCost"]
