"""ERC-4337 UserOperations for EntryPoint v0.6: the unpacked struct that release takes on chain
and on the wire, its userOpHash, and its JSON form.

v0.6 carries each gas and fee value in a field of its own, the factory inside `initCode` and
the paymaster inside `paymasterAndData` (no paymaster gas limits: the paymaster's validation
runs under the op's `verificationGasLimit`, and its postOp too).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from eth_abi.abi import encode

from entryway.domain.evm import checksum, keccak

USER_OP_V06_TYPE = (
    "(address,uint256,bytes,bytes,uint256,uint256,uint256,uint256,uint256,bytes,bytes)"
)
# With a paymaster, v0.6 reserves the verification gas three times: the account's
# validation, the paymaster's validation and its postOp.
_PAYMASTER_GAS_MULTIPLIER = 3

# The JSON fields of a v0.6 op, in struct order: (name, is a quantity).
_FIELDS = (
    ("sender", False),
    ("nonce", True),
    ("initCode", False),
    ("callData", False),
    ("callGasLimit", True),
    ("verificationGasLimit", True),
    ("preVerificationGas", True),
    ("maxFeePerGas", True),
    ("maxPriorityFeePerGas", True),
    ("paymasterAndData", False),
    ("signature", False),
)


@dataclass(frozen=True, slots=True)
class UserOperationV06:
    sender: str
    nonce: int
    init_code: bytes
    call_data: bytes
    call_gas_limit: int
    verification_gas_limit: int
    pre_verification_gas: int
    max_fee_per_gas: int
    max_priority_fee_per_gas: int
    paymaster_and_data: bytes = b""
    signature: bytes = b""

    @property
    def factory(self) -> str | None:
        return checksum(self.init_code[:20]) if len(self.init_code) >= 20 else None

    @property
    def paymaster(self) -> str | None:
        pm = self.paymaster_and_data
        return checksum(pm[:20]) if len(pm) >= 20 else None

    @property
    def max_gas(self) -> int:
        """All the gas the op may be charged for (v0.6's `requiredGas`)."""
        multiplier = 1 if self.paymaster is None else _PAYMASTER_GAS_MULTIPLIER
        return (
            self.call_gas_limit
            + self.verification_gas_limit * multiplier
            + self.pre_verification_gas
        )

    @property
    def required_prefund(self) -> int:
        return self.max_gas * self.max_fee_per_gas

    def as_tuple(
        self,
    ) -> tuple[str, int, bytes, bytes, int, int, int, int, int, bytes, bytes]:
        """The UserOperation struct, in ABI order (what `handleOps` of v0.6 takes)."""
        return (
            checksum(self.sender),
            self.nonce,
            self.init_code,
            self.call_data,
            self.call_gas_limit,
            self.verification_gas_limit,
            self.pre_verification_gas,
            self.max_fee_per_gas,
            self.max_priority_fee_per_gas,
            self.paymaster_and_data,
            self.signature,
        )

    def abi_encoded(self) -> bytes:
        """The struct ABI-encoded in place, as it follows its offset word in calldata."""
        return encode([USER_OP_V06_TYPE], [self.as_tuple()])[32:]

    def with_signature(self, signature: bytes) -> UserOperationV06:
        return replace(self, signature=signature)

    def with_paymaster_and_data(self, paymaster_and_data: bytes) -> UserOperationV06:
        return replace(self, paymaster_and_data=paymaster_and_data)


def user_op_hash_v06(op: UserOperationV06, entry_point: str, chain_id: int) -> bytes:
    """The userOpHash EntryPoint v0.6 computes: keccak of the ABI encoding of (keccak of the
    op's fields, its byte fields hashed and the signature left out; the EntryPoint; the chain
    id)."""
    inner = encode(
        [
            "address",
            "uint256",
            "bytes32",
            "bytes32",
            "uint256",
            "uint256",
            "uint256",
            "uint256",
            "uint256",
            "bytes32",
        ],
        [
            checksum(op.sender),
            op.nonce,
            keccak(op.init_code),
            keccak(op.call_data),
            op.call_gas_limit,
            op.verification_gas_limit,
            op.pre_verification_gas,
            op.max_fee_per_gas,
            op.max_priority_fee_per_gas,
            keccak(op.paymaster_and_data),
        ],
    )
    return keccak(
        encode(["bytes32", "address", "uint256"], [keccak(inner), checksum(entry_point), chain_id])
    )


def op_v06_to_json(op: UserOperationV06) -> dict[str, Any]:
    """The v0.6 JSON-RPC form: hex quantities and data, every field present."""
    values: tuple[str | int | bytes, ...] = op.as_tuple()
    return {name: _json_value(value) for (name, _), value in zip(_FIELDS, values, strict=True)}


def _json_value(value: str | int | bytes) -> str:
    if isinstance(value, bytes):
        return "0x" + value.hex()
    return hex(value) if isinstance(value, int) else value


def op_v06_from_json(doc: dict[str, Any]) -> UserOperationV06:
    """A v0.6 op from its JSON form; ValueError naming the field that is missing or malformed."""
    values: list[Any] = []
    for name, quantity in _FIELDS:
        raw = doc.get(name)
        if not isinstance(raw, str) or not raw.startswith("0x"):
            raise ValueError(f"{name}: expected a 0x-prefixed hex string, got {raw!r}")
        try:
            if name == "sender":
                values.append(checksum(raw))
            elif quantity:
                values.append(int(raw, 16))
            else:
                values.append(bytes.fromhex(raw[2:]))
        except ValueError:
            raise ValueError(f"{name}: not valid hex: {raw!r}") from None
    return UserOperationV06(*values)
