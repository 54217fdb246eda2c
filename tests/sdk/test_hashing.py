"""The SDK's own hashing, encoding and signing agree with the service's (which tests hold
equal to the contracts' view functions on anvil)."""

from __future__ import annotations

import json
from importlib import resources

from entryway_sdk import abi
from entryway_sdk.calls import Call, as_calls, execute_call_data, self_call_data
from entryway_sdk.recovery import ordered_signatures, sign_recovery_approval
from entryway_sdk.signer import as_signer, dummy_signature, sign
from entryway_sdk.userop import (
    ENTRY_POINT_V08,
    UserOperation,
    message_digest,
    recovery_digest,
    user_op_hash,
)
from eth_account import Account
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from entryway import contracts
from entryway.bundler.rpc_types import parse_user_operation, user_operation_json
from entryway.domain import signatures as service_sigs
from entryway.domain import userop as service_userop
from tests.unit.test_userop import user_ops

ZERO_ADDRESS = "0x" + "00" * 20
ACCOUNT = contracts.load("SmartAccount").abi
OWNER = Account.from_key("0x" + "11" * 32)


def sdk_op(op: service_userop.UserOperation) -> UserOperation:
    return UserOperation.from_rpc(user_operation_json(op))


# A fixed op whose hashes are known vectors (the v0.7 one checked in test_existing_account).
VECTOR_OP = UserOperation(
    sender="0x1111111111111111111111111111111111111111",
    nonce=7,
    call_data=bytes.fromhex("b61d27f6"),
    call_gas_limit=100_000,
    verification_gas_limit=200_000,
    pre_verification_gas=50_000,
    max_fee_per_gas=3 * 10**9,
    max_priority_fee_per_gas=10**9,
    factory="0x2222222222222222222222222222222222222222",
    factory_data=b"\x01\x02",
    paymaster="0x3333333333333333333333333333333333333333",
    paymaster_verification_gas_limit=60_000,
    paymaster_data=b"\xaa" * 77,
)


def test_a_known_user_op_hash() -> None:
    """A fixed vector, computed by `entryway.domain.userop.user_op_hash`."""
    op = VECTOR_OP
    assert (
        user_op_hash(op, ENTRY_POINT_V08, 80002).hex()
        == "7d8b4eeb4d8695d602c78ea512b0b6de42934c33a8e260f557794b2ef79eb1b7"
    )
    service = parse_user_operation(op.to_rpc())
    expected = service_userop.user_op_hash(service, ENTRY_POINT_V08, 80002)
    assert user_op_hash(op, ENTRY_POINT_V08, 80002) == expected


@settings(max_examples=60, deadline=None)
@given(op=user_ops(), chain_id=st.sampled_from([80002, 84532, 137, 8453]))
def test_user_op_hash_matches_the_service(op: service_userop.UserOperation, chain_id: int) -> None:
    assume(ZERO_ADDRESS not in (op.factory, op.paymaster))  # on the wire: "none"
    mine = sdk_op(op)
    assert user_op_hash(mine, ENTRY_POINT_V08, chain_id) == service_userop.user_op_hash(
        op, ENTRY_POINT_V08, chain_id
    )
    # the wire form round-trips and is what the service parses
    assert parse_user_operation(mine.to_rpc()) == op
    assert mine.init_code == op.init_code and mine.paymaster_and_data == op.paymaster_and_data


@settings(max_examples=30, deadline=None)
@given(
    account=st.binary(min_size=20, max_size=20),
    new_owner=st.binary(min_size=20, max_size=20),
    nonce=st.integers(min_value=0, max_value=2**256 - 1),
    message=st.binary(min_size=32, max_size=32),
)
def test_smart_account_digests_match_the_service(
    account: bytes, new_owner: bytes, nonce: int, message: bytes
) -> None:
    a, n = "0x" + account.hex(), "0x" + new_owner.hex()
    assert recovery_digest(a, n, nonce, 80002) == service_sigs.recovery_digest(a, n, nonce, 80002)
    assert message_digest(a, 84532, message) == service_sigs.message_digest(a, 84532, message)


async def test_signatures_are_raw_digest_signatures_as_the_service_makes_them() -> None:
    digest = bytes(range(32))
    signature = await sign(as_signer(OWNER), digest)
    assert signature == service_sigs.sign_digest(bytes(OWNER.key), digest)
    assert Account._recover_hash(digest, signature=signature) == OWNER.address
    stand_in = dummy_signature(digest)
    assert len(stand_in) == 65 and Account._recover_hash(digest, signature=stand_in) not in (
        OWNER.address,
    )


async def test_an_async_signer_with_v_as_0_or_1_is_accepted() -> None:
    class Remote:
        address = OWNER.address

        async def sign_digest(self, digest: bytes) -> bytes:
            raw = OWNER.unsafe_sign_hash(digest).signature
            return bytes(raw[:64]) + bytes([raw[64] - 27])

    digest = b"\x07" * 32
    assert await sign(as_signer(Remote()), digest) == service_sigs.sign_digest(
        bytes(OWNER.key), digest
    )


async def test_recovery_approvals_are_sorted_as_start_recovery_requires() -> None:
    account, new_owner = Account.create().address, Account.create().address
    guardians = [Account.create() for _ in range(4)]
    approvals = [await sign_recovery_approval(g, account, new_owner, 3, 80002) for g in guardians]
    ordered = ordered_signatures(list(reversed(approvals)), account, new_owner, 80002)
    digest = service_sigs.recovery_digest(account, new_owner, 3, 80002)
    by_service = service_sigs.sort_approvals(
        {g.address: service_sigs.sign_digest(bytes(g.key), digest) for g in guardians}
    )
    assert ordered == by_service


async def test_mismatched_or_duplicate_approvals_are_refused_before_sending() -> None:
    account, new_owner, other = (Account.create().address for _ in range(3))
    g = Account.create()
    approval = await sign_recovery_approval(g, account, new_owner, 0, 80002)
    for args in ((account, other, 80002), (other, new_owner, 80002), (account, new_owner, 1)):
        try:
            ordered_signatures([approval], *args)
        except ValueError:
            continue
        raise AssertionError(f"accepted an approval for {args}")
    try:
        ordered_signatures([approval, approval], account, new_owner, 80002)
    except ValueError as exc:
        assert "one guardian" in str(exc)
    else:
        raise AssertionError("a duplicate approval was accepted")


def test_call_data_is_the_contracts_encoding() -> None:
    to, data = Account.create().address, b"\x12\x34"
    assert execute_call_data(as_calls({"to": to, "value": "0x5", "data": "0x1234"})) == (
        ACCOUNT.encode_call("execute", to, 5, data)
    )
    calls = [Call(to, 1, data), Call(to.lower())]
    assert execute_call_data(calls) == ACCOUNT.encode_call(
        "executeBatch", [(to, 1, data), (to, 0, b"")]
    )
    me = Account.create().address
    assert self_call_data(me, "setGuardianThreshold", 2) == ACCOUNT.encode_call(
        "execute", me, 0, ACCOUNT.encode_call("setGuardianThreshold", 2)
    )


def shipped(name: str) -> list[dict[str, object]]:
    text = resources.files("entryway_sdk").joinpath("abi", f"{name}.json").read_text()
    return list(json.loads(text))


def test_the_shipped_abis_are_the_compiled_artifacts() -> None:
    for name in ("SmartAccount", "AccountFactory"):
        assert shipped(name) == contracts.load(name).raw_abi, name
    entry_point = contracts.load("EntryPoint").raw_abi
    assert all(entry in entry_point for entry in shipped("EntryPoint"))
    for fn in ("startRecovery", "executeBatch", "recoveryDigest"):
        assert abi.load("SmartAccount").selector(fn) == ACCOUNT.selector(fn)


def test_the_notary_abi_fragment_is_the_contracts() -> None:
    notary = contracts.load("NotaryAnchor").abi
    assert all(entry in contracts.load("NotaryAnchor").raw_abi for entry in shipped("NotaryAnchor"))
    assert abi.load("NotaryAnchor").selector("anchorOf") == notary.selector("anchorOf")
    assert abi.load("NotaryAnchor").event_topic("Anchored") == notary.event_topic("Anchored")
