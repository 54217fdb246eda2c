"""Checks on an op's fields that need no simulation. Pure.

Three layers, each refusing with -32602 and a message naming the field and the bound:

- `check_bounds`: every op, wherever it enters — estimated with placeholders, shown to the
  paymaster with its gas not yet filled in, sent: each gas limit within the chain's bound,
  the fees within its ceiling. Nothing computed from the op later (its most expensive
  cost, a credit hold) can then reach numbers the service cannot hold.
- `check_op_gas`: an op whose gas is filled in (sent, or signed by the paymaster): the
  validation limits, the sum of its limits, a tip no higher than its fee.
- `check_sanity`: an op being sent: all the above, the chain's minimum tip and the base fee.
"""

from __future__ import annotations

from dataclasses import dataclass

from entryway.bundler.errors import invalid_params
from entryway.domain.networks import (
    MAX_GAS_LIMIT,
    MAX_USER_OPERATION_GAS,
    FeeRules,
    fee_rules_for,
)
from entryway.domain.userop import UserOperation

DEFAULT_FEE_RULES = FeeRules()


@dataclass(frozen=True, slots=True)
class SanityLimits:
    max_verification_gas: int = 10_000_000
    max_bundle_gas: int = MAX_USER_OPERATION_GAS  # the op's limits summed
    max_gas_limit: int = MAX_GAS_LIMIT  # each limit on its own
    min_priority_fee_per_gas: int = 0
    max_fee_per_gas: int = DEFAULT_FEE_RULES.max_fee_per_gas

    @classmethod
    def for_chain(cls, chain_id: int) -> SanityLimits:
        """The bounds of the chain's fee rules (`entryway.domain.networks`)."""
        rules = fee_rules_for(chain_id)
        return cls(
            max_bundle_gas=rules.max_user_operation_gas,
            max_gas_limit=rules.max_gas_limit,
            min_priority_fee_per_gas=rules.min_priority_fee_per_gas,
            max_fee_per_gas=rules.max_fee_per_gas,
        )


def _gas_fields(op: UserOperation) -> tuple[tuple[str, int], ...]:
    return (
        ("preVerificationGas", op.pre_verification_gas),
        ("verificationGasLimit", op.verification_gas_limit),
        ("callGasLimit", op.call_gas_limit),
        ("paymasterVerificationGasLimit", op.paymaster_verification_gas_limit),
        ("paymasterPostOpGasLimit", op.paymaster_post_op_gas_limit),
    )


def check_bounds(op: UserOperation, limits: SanityLimits) -> None:
    """Each gas limit and both fees under the chain's bounds. Unset fields (zero) pass."""
    for name, value in _gas_fields(op):
        if value > limits.max_gas_limit:
            raise invalid_params(
                f"{name} {value} is above this chain's bound of {limits.max_gas_limit} gas"
            )
    fees = (
        ("maxFeePerGas", op.max_fee_per_gas),
        ("maxPriorityFeePerGas", op.max_priority_fee_per_gas),
    )
    for name, value in fees:
        if value > limits.max_fee_per_gas:
            raise invalid_params(
                f"{name} {value} is above this chain's ceiling of {limits.max_fee_per_gas} wei"
            )


def check_op_gas(op: UserOperation, limits: SanityLimits) -> None:
    """An op with its gas filled in: `check_bounds`, the validation limits and their sum."""
    check_bounds(op, limits)
    validation = (
        ("verificationGasLimit", op.verification_gas_limit),
        ("paymasterVerificationGasLimit", op.paymaster_verification_gas_limit),
    )
    for name, value in validation:
        if value > limits.max_verification_gas:
            raise invalid_params(
                f"{name} {value} is above the maximum of {limits.max_verification_gas} gas"
            )
    total = sum(value for _, value in _gas_fields(op))
    if total > limits.max_bundle_gas:
        raise invalid_params(
            f"the op's total gas {total} is above this chain's bound of {limits.max_bundle_gas} gas"
        )
    if op.max_priority_fee_per_gas > op.max_fee_per_gas:
        raise invalid_params(
            f"maxPriorityFeePerGas {op.max_priority_fee_per_gas} is above maxFeePerGas "
            f"{op.max_fee_per_gas}"
        )


def check_sanity(
    op: UserOperation,
    *,
    base_fee: int,
    limits: SanityLimits,
) -> None:
    """Field checks. Whether the sender exists (AA10/AA20) is left to the simulation."""
    check_op_gas(op, limits)
    if op.max_priority_fee_per_gas < limits.min_priority_fee_per_gas:
        raise invalid_params(
            f"maxPriorityFeePerGas {op.max_priority_fee_per_gas} is below the chain's minimum "
            f"{limits.min_priority_fee_per_gas}"
        )
    if op.max_fee_per_gas < base_fee:
        raise invalid_params(f"maxFeePerGas {op.max_fee_per_gas} is below the base fee {base_fee}")
