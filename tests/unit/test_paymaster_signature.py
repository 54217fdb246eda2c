"""EntryPoint v0.9's paymasterSignature suffix, as the release's UserOperationLib reads it: its
encoding, where the signature is found, what the userOpHash covers, and bad lengths refused.
(On-chain agreement: tests/integration/bundler/test_entry_point_v09.py.)"""

from __future__ import annotations

import pytest

from entryway.bundler.errors import BundlerError
from entryway.bundler.rpc_types import parse_user_operation
from entryway.domain.evm import keccak
from entryway.domain.paymaster_signature import (
    PAYMASTER_SIGNATURE_MAGIC,
    encode_paymaster_signature,
    paymaster_signature_length,
    signed_paymaster_and_data_hash,
    split_paymaster_signature,
)

HEAD = bytes.fromhex("aa" * 20) + (60_000).to_bytes(16) + bytes(16)  # paymaster, gas limits


def test_magic_is_the_releases() -> None:
    assert keccak(b"PaymasterSignature")[:8] == PAYMASTER_SIGNATURE_MAGIC


def test_a_signature_round_trips_and_leaves_the_hash() -> None:
    data = bytes.fromhex("0102")
    signature = b"\x07" * 65
    pnd = HEAD + data + encode_paymaster_signature(signature)
    assert pnd[-10:] == (65).to_bytes(2) + PAYMASTER_SIGNATURE_MAGIC
    assert paymaster_signature_length(pnd) == 65
    assert split_paymaster_signature(pnd) == (HEAD + data, signature)
    assert signed_paymaster_and_data_hash(pnd) == keccak(HEAD + data + PAYMASTER_SIGNATURE_MAGIC)
    other = HEAD + data + encode_paymaster_signature(b"\x09" * 3)
    assert signed_paymaster_and_data_hash(other) == signed_paymaster_and_data_hash(pnd)


def test_without_the_magic_everything_is_hashed() -> None:
    pnd = HEAD + b"\x00" * 20
    assert paymaster_signature_length(pnd) == 0
    assert split_paymaster_signature(pnd) == (pnd, b"")
    assert signed_paymaster_and_data_hash(pnd) == keccak(pnd)
    assert encode_paymaster_signature(b"") == b""


def test_a_length_beyond_the_data_is_refused() -> None:
    pnd = HEAD + b"\x01" * 4 + (5).to_bytes(2) + PAYMASTER_SIGNATURE_MAGIC
    with pytest.raises(ValueError, match="length 5"):
        paymaster_signature_length(pnd)
    assert paymaster_signature_length(HEAD + b"\x01" * 5 + pnd[-10:]) == 5


def test_rpc_takes_a_separate_paymaster_signature() -> None:
    raw = {
        "sender": "0x" + "11" * 20,
        "nonce": "0x0",
        "callData": "0x",
        "callGasLimit": "0x1",
        "verificationGasLimit": "0x1",
        "preVerificationGas": "0x1",
        "maxFeePerGas": "0x1",
        "maxPriorityFeePerGas": "0x1",
        "signature": "0x",
        "paymaster": "0x" + "aa" * 20,
        "paymasterVerificationGasLimit": "0x1",
        "paymasterPostOpGasLimit": "0x0",
        "paymasterData": "0x0102",
        "paymasterSignature": "0x" + "07" * 65,
    }
    op = parse_user_operation(raw)
    assert op.paymaster_data == bytes.fromhex("0102") + encode_paymaster_signature(b"\x07" * 65)
    with pytest.raises(BundlerError, match="paymasterSignature"):
        parse_user_operation(raw | {"paymasterSignature": "0x" + "00" * 70_000})
