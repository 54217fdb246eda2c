"""Checks on an op's fields that need no simulation. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from entryway.bundler.errors import invalid_params
from entryway.domain.userop import UserOperation


@dataclass(frozen=True, slots=True)
class SanityLimits:
    max_verification_gas: int = 10_000_000
    max_bundle_gas: int = 15_000_000
    min_priority_fee_per_gas: int = 0


def check_sanity(
    op: UserOperation,
    *,
    base_fee: int,
    limits: SanityLimits,
) -> None:
    """Field checks. Whether the sender exists (AA10/AA20) is left to the simulation."""
    if op.verification_gas_limit > limits.max_verification_gas:
        raise invalid_params(
            f"verificationGasLimit {op.verification_gas_limit} is above the maximum "
            f"{limits.max_verification_gas}"
        )
    if (
        op.paymaster is not None
        and op.paymaster_verification_gas_limit > limits.max_verification_gas
    ):
        raise invalid_params("paymasterVerificationGasLimit is above the maximum")
    if op.max_priority_fee_per_gas > op.max_fee_per_gas:
        raise invalid_params("maxPriorityFeePerGas is above maxFeePerGas")
    if op.max_priority_fee_per_gas < limits.min_priority_fee_per_gas:
        raise invalid_params(
            f"maxPriorityFeePerGas {op.max_priority_fee_per_gas} is below the chain's minimum "
            f"{limits.min_priority_fee_per_gas}"
        )
    if op.max_fee_per_gas < base_fee:
        raise invalid_params(f"maxFeePerGas {op.max_fee_per_gas} is below the base fee {base_fee}")
    total = (
        op.pre_verification_gas
        + op.verification_gas_limit
        + op.call_gas_limit
        + op.paymaster_verification_gas_limit
        + op.paymaster_post_op_gas_limit
    )
    if total > limits.max_bundle_gas:
        raise invalid_params(
            f"the op's total gas {total} exceeds the bundle limit {limits.max_bundle_gas}"
        )
