"""v0.6 SimpleAccount ops for the tests: the release's factory deployed, a new account's first
op funded and signed as v0.6's SimpleAccount checks (an EIP-191 message of the hash)."""

from __future__ import annotations

from typing import Any

from entryway import contracts
from entryway.deploy.deployer import ContractDeployer
from entryway.deploy.plan import ENTRYWAY_SALT, plan_contract
from entryway.domain.entry_points import V06
from entryway.domain.evm import address_bytes
from entryway.domain.signatures import eth_signed_message_digest, sign_digest
from entryway.domain.userop_v06 import UserOperationV06, user_op_hash_v06
from tests.integration.harness import ETHER, Harness

EP06 = contracts.load("EntryPointV06").abi
FACTORY06 = contracts.load("SimpleAccountFactoryV06")


async def factory_v06(h: Harness) -> str:
    init = FACTORY06.bytecode + bytes(12) + address_bytes(V06.address)
    plan = plan_contract("simpleAccountFactoryV06", "SimpleAccountFactoryV06", ENTRYWAY_SALT, init)
    await ContractDeployer(h.eth, h.executor).ensure(plan)
    return plan.address


async def first_op(h: Harness, call_data: bytes = b"") -> tuple[UserOperationV06, Any]:
    """A new v0.6 SimpleAccount's first op, funded, signed as v0.6's SimpleAccount checks (an
    EIP-191 message of the hash)."""
    owner = h.new_key()
    factory = await factory_v06(h)
    raw = await h.eth.call(factory, FACTORY06.abi.encode_call("getAddress", owner.address, 0))
    sender = str(FACTORY06.abi.decode_output("getAddress", raw)[0])
    await h.fund(sender, ETHER)
    max_fee, priority = await h.fees()
    op = UserOperationV06(
        sender=sender,
        nonce=0,
        init_code=address_bytes(factory)
        + FACTORY06.abi.encode_call("createAccount", owner.address, 0),
        call_data=call_data,
        call_gas_limit=100_000,
        verification_gas_limit=500_000,
        pre_verification_gas=60_000,
        max_fee_per_gas=max_fee,
        max_priority_fee_per_gas=priority,
    )
    return sign(h, op, owner), owner


def sign(h: Harness, op: UserOperationV06, owner: Any) -> UserOperationV06:
    digest = eth_signed_message_digest(user_op_hash_v06(op, V06.address, h.chain_id))
    return op.with_signature(sign_digest(bytes(owner.key), digest))
