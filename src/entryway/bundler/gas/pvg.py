"""preVerificationGas: what an op adds to the bundle transaction outside the EntryPoint's own
metering — its share of the intrinsic cost, the calldata it occupies and the EntryPoint's
per-op work — with the EIP-7623 calldata floor of Prague. Pure.

The bundle transaction pays max(standard, floor), where standard is calldata at 4 gas per
token plus execution, and floor is 10 gas per token (a token: a zero byte, or a quarter of a
non-zero one). Execution an op brings is not known before it runs, so it is credited with
what it is sure to use: its measured verification gas and a tenth of its call and postOp
limits (the EntryPoint charges 10% of unused execution gas as a penalty).
"""

from __future__ import annotations

from dataclasses import dataclass

from entryway.domain.userop import UserOperation

DUMMY_SIGNATURE_LENGTH = 65


@dataclass(frozen=True, slots=True)
class CalldataPricing:
    transaction_stipend: int = 21_000  # intrinsic gas of the bundle transaction
    bundle_overhead: int = 9_830  # handleOps work shared by all ops
    per_op_overhead: int = 7_260  # the EntryPoint's per-op work
    per_call_data_word_milli: int = 9_500  # per 32-byte word of callData, in thousandths
    token_gas: int = 4
    floor_token_gas: int = 10  # EIP-7623
    tokens_per_non_zero_byte: int = 4
    expected_bundle_size: int = 1


def _non_zero(data: bytes) -> bytes:
    return data.replace(b"\x00", b"\x01")


def with_full_signature(op: UserOperation) -> UserOperation:
    """For estimates: the op as it may look once signed. Stub signatures and paymaster data
    are often shorter or emptier than the final ones, and every non-zero calldata byte costs
    four times a zero one, so both are counted full and non-zero."""
    signature = op.signature.ljust(DUMMY_SIGNATURE_LENGTH, b"\x01")
    signed = op.with_signature(_non_zero(signature))
    if op.paymaster is None:
        return signed
    return signed.with_paymaster(
        op.paymaster,
        op.paymaster_verification_gas_limit,
        op.paymaster_post_op_gas_limit,
        _non_zero(op.paymaster_data),
    )


def _encoded(op: UserOperation) -> bytes:
    """The op ABI-encoded as the PackedUserOperation struct, the shape it has in handleOps."""
    return (32).to_bytes(32, "big") + op.abi_encoded()


def tokens(data: bytes) -> int:
    zeros = data.count(0)
    return zeros + (len(data) - zeros) * 4


def pre_verification_gas(
    op: UserOperation, verification_gas_used: int, pricing: CalldataPricing = CalldataPricing()
) -> int:
    """The least preVerificationGas `op` needs, given the verification gas it was measured to
    use (account, factory and paymaster together)."""
    data = _encoded(op)
    token_count = tokens(data)
    standard_calldata = token_count * pricing.token_gas
    floor = token_count * pricing.floor_token_gas
    words = (len(op.call_data) + 31) // 32
    per_op = pricing.per_op_overhead + (pricing.per_call_data_word_milli * words + 999) // 1000
    sure_to_use = (
        op.call_gas_limit // 10 + op.paymaster_post_op_gas_limit // 10 + verification_gas_used
    )
    size = pricing.expected_bundle_size
    execution = pricing.bundle_overhead // size + per_op + sure_to_use
    total = pricing.transaction_stipend // size + max(standard_calldata + execution, floor)
    return max(total - sure_to_use, 0)


def minimum_pre_verification_gas(
    op: UserOperation, pricing: CalldataPricing = CalldataPricing()
) -> int:
    """A bound that holds whatever the op's verification uses: checkable before simulating."""
    return pre_verification_gas(op, 10**12, pricing)
