"""The v0.6 UserOperation: its JSON form both ways, bad fields named, and the gas it reserves
(three times the verification gas with a paymaster). Its hash is checked against the
EntryPoint itself in tests/integration/test_entry_point_v06.py."""

from __future__ import annotations

import pytest
from eth_abi.abi import decode

from entryway.domain.userop_v06 import (
    USER_OP_V06_TYPE,
    UserOperationV06,
    op_v06_from_json,
    op_v06_to_json,
)

SENDER = "0x1111111111111111111111111111111111111111"
PAYMASTER = "0x2222222222222222222222222222222222222222"
OP = UserOperationV06(
    sender=SENDER,
    nonce=7,
    init_code=b"",
    call_data=b"\x01\x02",
    call_gas_limit=100,
    verification_gas_limit=1_000,
    pre_verification_gas=10,
    max_fee_per_gas=5,
    max_priority_fee_per_gas=2,
    signature=b"\xee" * 65,
)


def test_json_round_trip_carries_every_field() -> None:
    doc = op_v06_to_json(OP.with_paymaster_and_data(bytes.fromhex(PAYMASTER[2:]) + b"\x01"))
    assert doc["nonce"] == "0x7" and doc["initCode"] == "0x" and doc["callData"] == "0x0102"
    assert doc["paymasterAndData"] == PAYMASTER + "01"
    assert set(doc) == {
        "sender",
        "nonce",
        "initCode",
        "callData",
        "callGasLimit",
        "verificationGasLimit",
        "preVerificationGas",
        "maxFeePerGas",
        "maxPriorityFeePerGas",
        "paymasterAndData",
        "signature",
    }
    back = op_v06_from_json(doc)
    assert back.paymaster == PAYMASTER and back.factory is None
    assert op_v06_to_json(back) == doc


@pytest.mark.parametrize(
    ("field", "value"),
    [("nonce", None), ("callGasLimit", "12"), ("signature", "0xzz"), ("sender", 5)],
)
def test_a_missing_or_malformed_field_is_named(field: str, value: object) -> None:
    doc = op_v06_to_json(OP)
    if value is None:
        del doc[field]
    else:
        doc[field] = value
    with pytest.raises(ValueError, match=field):
        op_v06_from_json(doc)


def test_a_paymaster_triples_the_verification_gas_reserved() -> None:
    assert OP.max_gas == 100 + 1_000 + 10
    sponsored = OP.with_paymaster_and_data(bytes.fromhex(PAYMASTER[2:]))
    assert sponsored.max_gas == 100 + 3 * 1_000 + 10
    assert sponsored.required_prefund == sponsored.max_gas * 5


def test_abi_encoding_is_the_struct() -> None:
    encoded = (32).to_bytes(32, "big") + OP.abi_encoded()
    assert decode([USER_OP_V06_TYPE], encoded)[0][1:] == OP.as_tuple()[1:]
