"""UserOperations as they arrive over JSON-RPC: quantities are hex strings, nothing else."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from entryway.bundler.errors import BundlerError, RpcErrorCode
from entryway.bundler.rpc_types import parse_user_operation, user_operation_json
from entryway.domain.userop import UserOperation

SENDER = "0x1111111111111111111111111111111111111111"
PAYMASTER = "0x3333333333333333333333333333333333333333"
QUANTITIES = (
    "nonce",
    "callGasLimit",
    "verificationGasLimit",
    "preVerificationGas",
    "maxFeePerGas",
    "maxPriorityFeePerGas",
    "paymasterVerificationGasLimit",
    "paymasterPostOpGasLimit",
)


def wire(**changes: Any) -> dict[str, Any]:
    op = UserOperation(
        sender=SENDER,
        nonce=7,
        call_data=b"\x01",
        call_gas_limit=50_000,
        verification_gas_limit=100_000,
        pre_verification_gas=60_000,
        max_fee_per_gas=2_000_000_000,
        max_priority_fee_per_gas=1_000_000_000,
        signature=b"\x02" * 65,
    ).with_paymaster(PAYMASTER, 70_000, 30_000, b"\x03")
    return user_operation_json(op) | changes


def refusal(raw: dict[str, Any]) -> str:
    with pytest.raises(BundlerError) as caught:
        parse_user_operation(raw)
    assert caught.value.code is RpcErrorCode.INVALID_PARAMS
    return caught.value.message


@pytest.mark.parametrize("field", QUANTITIES)
@pytest.mark.parametrize(
    "value", [7, 0, 1.0, True, False, "7", "0x", "0X7", "0xg", "0x7\n", " 0x7"]
)
def test_a_quantity_that_is_not_a_hex_string_is_refused_naming_its_field(
    field: str, value: Any
) -> None:
    message = refusal(wire(**{field: value}))
    assert message.startswith(f"{field}: expected a hex quantity")


@pytest.mark.parametrize("field", ["chainId", "nonce", "yParity", "r", "s"])
def test_an_authorizations_quantities_are_hex_strings_too(field: str) -> None:
    auth = {
        "chainId": "0x1",
        "address": PAYMASTER,
        "nonce": "0x0",
        "yParity": "0x1",
        "r": "0x5",
        "s": "0x6",
    }
    message = refusal(wire(eip7702Auth={**auth, field: 1}))
    assert message == f"eip7702Auth.{field}: expected a hex quantity string, got a number"


def test_the_message_says_what_came_without_echoing_a_huge_value() -> None:
    assert refusal(wire(nonce=12)) == "nonce: expected a hex quantity string, got a number"
    assert refusal(wire(nonce=True)) == "nonce: expected a hex quantity string, got a boolean"
    assert refusal(wire(nonce=[])) == "nonce: expected a hex quantity string, got an array"
    assert refusal(wire(nonce={})) == "nonce: expected a hex quantity string, got an object"
    long = refusal(wire(nonce="0x" + "z" * 10_000))
    assert long.startswith("nonce: expected a hex quantity (0x…)") and len(long) < 200


def test_hex_data_and_addresses_are_held_to_their_whole_string() -> None:
    assert refusal(wire(callData="0x01\n")).startswith("callData: expected hex bytes")
    assert refusal(wire(paymasterData=0)).startswith("paymasterData: expected hex bytes")
    assert refusal(wire(sender=SENDER + "\n")).startswith("sender: expected a 20-byte")


@given(st.integers(min_value=0, max_value=2**128 - 1), st.integers(min_value=0, max_value=8))
def test_leading_zeros_are_tolerated(value: int, zeros: int) -> None:
    """Several clients pad their quantities ("0x01"); the value is the same."""
    padded = "0x" + "0" * zeros + format(value, "x")
    parsed = parse_user_operation(wire(nonce=padded, callGasLimit=padded))
    assert (parsed.nonce, parsed.call_gas_limit) == (value, value)


def test_more_than_a_words_digits_are_refused() -> None:
    assert parse_user_operation(wire(nonce="0x" + "0" * 63 + "1")).nonce == 1
    assert refusal(wire(nonce="0x" + "0" * 64 + "1")).startswith("nonce: expected a hex quantity")


def test_optional_fields_default_only_when_missing_or_null() -> None:
    raw = wire()
    for name in ("paymasterVerificationGasLimit", "paymasterPostOpGasLimit", "paymasterData"):
        del raw[name]
    parsed = parse_user_operation(raw)
    assert (parsed.paymaster_verification_gas_limit, parsed.paymaster_post_op_gas_limit) == (0, 0)
    nulls = parse_user_operation(wire(paymasterPostOpGasLimit=None, factoryData=None))
    assert (nulls.paymaster_post_op_gas_limit, nulls.factory_data) == (0, b"")
    assert refusal(wire(paymasterPostOpGasLimit=0)).startswith("paymasterPostOpGasLimit")
    assert refusal(wire(factoryData=False)).startswith("factoryData")


def test_the_wire_form_round_trips() -> None:
    raw = wire()
    assert user_operation_json(parse_user_operation(raw)) == raw
