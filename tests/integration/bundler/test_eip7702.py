"""An EOA becomes a smart account in its first UserOperation: the bundler carries its
EIP-7702 authorization (to the release's Simple7702Account) in a type-4 bundle."""

from __future__ import annotations

from eth_account import Account
from eth_keys.datatypes import PrivateKey

from entryway import contracts
from entryway.deploy.deployer import ContractDeployer
from entryway.deploy.plan import ENTRYWAY_SALT, plan_contract
from entryway.domain.eip7702 import Authorization, delegate_of
from entryway.domain.signatures import sign_digest
from entryway.domain.userop import UserOperation, user_op_hash
from tests.integration.bundler.conftest import RpcClient
from tests.integration.harness import ETHER, Harness

SIMPLE_7702 = contracts.load("Simple7702Account")


def authorize(key: bytes, chain_id: int, delegate: str, nonce: int) -> Authorization:
    unsigned = Authorization(chain_id, delegate, nonce, 0, 0, 0)
    sig = PrivateKey(key).sign_msg_hash(unsigned.digest())
    return Authorization(chain_id, delegate, nonce, int(sig.v), int(sig.r), int(sig.s))


async def delegated_op(h: Harness, eoa: object, auth: Authorization | None) -> UserOperation:
    max_fee, priority = await h.fees()
    op = UserOperation(
        sender=eoa.address,  # type: ignore[attr-defined]
        nonce=0,
        call_data=b"",
        call_gas_limit=50_000,
        verification_gas_limit=200_000,
        pre_verification_gas=80_000,
        max_fee_per_gas=max_fee,
        max_priority_fee_per_gas=priority,
        eip7702_auth=auth,
    )
    digest = user_op_hash(op, h.deployment.entry_point, h.chain_id)
    return op.with_signature(sign_digest(bytes(eoa.key), digest))  # type: ignore[attr-defined]


async def implementation(h: Harness) -> str:
    plan = plan_contract("simple7702", "Simple7702Account", ENTRYWAY_SALT, SIMPLE_7702.bytecode)
    await ContractDeployer(h.eth, h.executor).ensure(plan)
    return plan.address


async def test_an_eoa_is_delegated_and_its_op_executed(client: RpcClient, harness: Harness) -> None:
    impl = await implementation(harness)
    eoa = Account.create()
    await harness.fund(eoa.address, ETHER)
    auth = authorize(bytes(eoa.key), harness.chain_id, impl, 0)
    op = await delegated_op(harness, eoa, auth)
    op_hash = await client.send(op)
    tx_hash = await client.bundle()
    assert delegate_of(await harness.eth.get_code(eoa.address)) == impl
    receipt = await client.result("eth_getUserOperationReceipt", op_hash)
    assert receipt["success"] is True and receipt["receipt"]["transactionHash"] == tx_hash
    raw_tx = await harness.eth.rpc.request("eth_getTransactionByHash", [tx_hash])
    assert int(raw_tx["type"], 16) == 4 and len(raw_tx["authorizationList"]) == 1


async def test_authorizations_that_cannot_apply_are_refused(
    client: RpcClient, harness: Harness
) -> None:
    impl = await implementation(harness)
    eoa, stranger = Account.create(), Account.create()
    await harness.fund(eoa.address, ETHER)
    cases = [
        (authorize(bytes(stranger.key), harness.chain_id, impl, 0), -32602, "not by the sender"),
        (authorize(bytes(eoa.key), 1234, impl, 0), -32602, "chainId"),
        (authorize(bytes(eoa.key), harness.chain_id, impl, 5), -32500, "nonce"),
    ]
    for auth, code, fragment in cases:
        error = await client.send_error(await delegated_op(harness, eoa, auth))
        assert error["code"] == code and fragment in error["message"], error
