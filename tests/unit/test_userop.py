from __future__ import annotations

import pytest
from entryway_sdk.userop import UserOperation as SdkUserOperation
from entryway_sdk.userop import user_op_hash as sdk_user_op_hash
from eth_abi.abi import encode
from hypothesis import given
from hypothesis import strategies as st

from entryway.domain.evm import checksum
from entryway.domain.userop import (
    UserOperation,
    pack_uint128_pair,
    unpack_uint128_pair,
    user_op_hash,
)

uint128 = st.integers(min_value=0, max_value=2**128 - 1)
addresses = st.binary(min_size=20, max_size=20).map(checksum)


@st.composite
def user_ops(draw: st.DrawFn) -> UserOperation:
    factory = draw(st.none() | addresses)
    paymaster = draw(st.none() | addresses)
    return UserOperation(
        sender=draw(addresses),
        nonce=draw(st.integers(min_value=0, max_value=2**256 - 1)),
        call_data=draw(st.binary(max_size=200)),
        call_gas_limit=draw(uint128),
        verification_gas_limit=draw(uint128),
        pre_verification_gas=draw(st.integers(min_value=0, max_value=2**256 - 1)),
        max_fee_per_gas=draw(uint128),
        max_priority_fee_per_gas=draw(uint128),
        signature=draw(st.binary(max_size=100)),
        factory=factory,
        factory_data=draw(st.binary(max_size=100)) if factory else b"",
        paymaster=paymaster,
        paymaster_verification_gas_limit=draw(uint128) if paymaster else 0,
        paymaster_post_op_gas_limit=draw(uint128) if paymaster else 0,
        paymaster_data=draw(st.binary(max_size=100)) if paymaster else b"",
    )


@given(uint128, uint128)
def test_uint128_pairs_round_trip(high: int, low: int) -> None:
    assert unpack_uint128_pair(pack_uint128_pair(high, low)) == (high, low)


def test_values_past_uint128_are_refused() -> None:
    with pytest.raises(ValueError):
        pack_uint128_pair(2**128, 0)


@given(user_ops())
def test_packed_form_round_trips(op: UserOperation) -> None:
    assert UserOperation.from_packed(op.packed()) == op


@given(user_ops(), st.binary(min_size=1, max_size=65))
def test_signature_is_not_part_of_the_hash(op: UserOperation, signature: bytes) -> None:
    ep = "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108"
    assert user_op_hash(op, ep, 80002) == user_op_hash(op.with_signature(signature), ep, 80002)


@given(user_ops())
def test_hash_binds_chain_and_entry_point(op: UserOperation) -> None:
    ep = "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108"
    base = user_op_hash(op, ep, 80002)
    assert base != user_op_hash(op, ep, 84532)
    assert base != user_op_hash(op, "0x0000000071727De22E5E9d8BAf0edAc6f37da032", 80002)


def test_every_signed_field_changes_the_hash() -> None:
    ep = "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108"
    op = UserOperation(
        sender="0x1111111111111111111111111111111111111111",
        nonce=1,
        call_data=b"\x01",
        call_gas_limit=2,
        verification_gas_limit=3,
        pre_verification_gas=4,
        max_fee_per_gas=5,
        max_priority_fee_per_gas=6,
        factory="0x2222222222222222222222222222222222222222",
        factory_data=b"\x07",
        paymaster="0x3333333333333333333333333333333333333333",
        paymaster_verification_gas_limit=8,
        paymaster_post_op_gas_limit=9,
        paymaster_data=b"\x0a",
    )
    from dataclasses import replace

    changes = {
        "sender": "0x4444444444444444444444444444444444444444",
        "nonce": 2,
        "call_data": b"\x02",
        "call_gas_limit": 3,
        "verification_gas_limit": 4,
        "pre_verification_gas": 5,
        "max_fee_per_gas": 6,
        "max_priority_fee_per_gas": 7,
        "factory_data": b"\x08",
        "paymaster_verification_gas_limit": 9,
        "paymaster_post_op_gas_limit": 10,
        "paymaster_data": b"\x0b",
    }
    hashes = {user_op_hash(replace(op, **{k: v}), ep, 1) for k, v in changes.items()}
    hashes.add(user_op_hash(op, ep, 1))
    assert len(hashes) == len(changes) + 1


@given(user_ops())
def test_the_written_out_encoding_is_eth_abis(op: UserOperation) -> None:
    packed_type = "(address,uint256,bytes,bytes,bytes32,uint256,bytes32,bytes,bytes)"
    assert (32).to_bytes(32, "big") + op.abi_encoded() == encode([packed_type], [op.packed()])


@given(user_ops())
def test_the_hash_agrees_with_the_sdks_own_implementation(op: UserOperation) -> None:
    """The SDK hashes with eth-abi, written separately: two implementations, one digest."""
    fields = {f: getattr(op, f) for f in SdkUserOperation.__dataclass_fields__}
    ep = "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108"
    assert user_op_hash(op, ep, 80002) == sdk_user_op_hash(SdkUserOperation(**fields), ep, 80002)
