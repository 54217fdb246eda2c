"""ERC-7677 for EntryPoint v0.6: its unpacked op in, its `paymasterAndData` out.

A v0.6 op travels inside the service as a `UserOperation` with no paymaster gas limits
(`UserOperation.from_v06`); here are only the edges the v0.6 form changes: how the client's
op is read, what the answer carries (`paymasterAndData`, the paymaster's address then its
data, instead of v0.7's four paymaster fields), and what the sponsorship gate is shown.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from entryway.bundler.errors import invalid_params
from entryway.domain.evm import address_bytes, to_hex
from entryway.domain.userop import UserOperation
from entryway.domain.userop_v06 import op_v06_from_json

# What a client may leave out (or null) of the op it shows before estimating gas.
_V06_UNSET = (
    "callGasLimit",
    "verificationGasLimit",
    "preVerificationGas",
    "maxFeePerGas",
    "maxPriorityFeePerGas",
)


def unsigned_op_v06(raw: Any) -> UserOperation:
    """The v0.6 op as ERC-7677 sends it: unsigned, its gas and fees possibly not filled in,
    its paymasterAndData (whatever it holds) to be replaced by ours."""
    if not isinstance(raw, dict):
        raise invalid_params("userOp: expected an object")
    filled = {k: "0x0" for k in _V06_UNSET} | {"paymasterAndData": "0x", "signature": "0x"}
    filled |= {k: v for k, v in raw.items() if v is not None}
    filled["paymasterAndData"] = "0x"
    if "initCode" not in filled:  # a client that names the factory as v0.7 does
        factory, data = filled.get("factory"), filled.get("factoryData") or "0x"
        if isinstance(factory, str) and isinstance(data, str):
            filled["initCode"] = factory + data.removeprefix("0x")
        else:
            filled["initCode"] = "0x"
    try:
        op = UserOperation.from_v06(op_v06_from_json(filled))
    except ValueError as exc:
        raise invalid_params(f"invalid v0.6 userOp: {exc}") from None
    return replace(op, signature=b"")


def with_paymaster_v06(op: UserOperation, paymaster: str) -> UserOperation:
    """The op naming `paymaster`, its data still empty (v0.6 signs over neither)."""
    return op.with_paymaster(paymaster, 0, 0, b"")


def as_charged_v06(op: UserOperation) -> UserOperation:
    """The op as the sponsorship gate weighs it: v0.6 reserves the op's verification gas
    again for the paymaster's validation and once more for its postOp, so the most it can
    cost is what a v0.7 op with those paymaster gas limits may cost."""
    return replace(
        op,
        paymaster_verification_gas_limit=op.verification_gas_limit,
        paymaster_post_op_gas_limit=op.verification_gas_limit,
    )


def fields_v06(paymaster: str, data: bytes) -> dict[str, Any]:
    return {"paymasterAndData": to_hex(address_bytes(paymaster) + data)}
