"""preVerificationGas: what an op adds to the bundle transaction outside the EntryPoint's
metering — its share of the intrinsic cost and the calldata it occupies. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from eth_abi.abi import encode

from entryway.domain.userop import UserOperation

PACKED_OP_TYPE = "(address,uint256,bytes,bytes,bytes32,uint256,bytes32,bytes,bytes)"
DUMMY_SIGNATURE_LENGTH = 65


@dataclass(frozen=True, slots=True)
class CalldataPricing:
    fixed: int = 21_000  # the bundle transaction's intrinsic gas
    per_op: int = 18_300  # the EntryPoint's per-op work outside the op's own metering
    per_word: int = 4  # memory and copying per 32-byte word of the packed op
    zero_byte: int = 4
    non_zero_byte: int = 16
    # EIP-7623 (Prague): a calldata-heavy transaction pays at least 10 gas per token,
    # a token being a zero byte or a quarter of a non-zero one.
    floor_per_token: int = 10
    bundle_size: int = 1


def packed_op_bytes(op: UserOperation) -> bytes:
    """The op as it sits in handleOps' calldata (ABI-encoded), with a full-size signature."""
    signature = op.signature
    if len(signature) < DUMMY_SIGNATURE_LENGTH:
        signature = signature + b"\x01" * (DUMMY_SIGNATURE_LENGTH - len(signature))
    return encode([PACKED_OP_TYPE], [op.with_signature(signature).packed()])


def pre_verification_gas(op: UserOperation, pricing: CalldataPricing = CalldataPricing()) -> int:
    data = packed_op_bytes(op)
    zeros = data.count(0)
    non_zeros = len(data) - zeros
    calldata = zeros * pricing.zero_byte + non_zeros * pricing.non_zero_byte
    words = (len(data) + 31) // 32
    standard = pricing.fixed // pricing.bundle_size + pricing.per_op + pricing.per_word * words
    standard += calldata
    tokens = zeros + 4 * non_zeros
    floor = pricing.fixed // pricing.bundle_size + pricing.floor_per_token * tokens
    return max(standard, floor)
