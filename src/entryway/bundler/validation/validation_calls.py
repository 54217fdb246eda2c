"""The calls EntryPoint v0.8 makes to an op's entities while validating it, encoded as
`_validatePrepayment` encodes them, for `EntrywaySimulations.traceValidation` to replay.
That function reads its arguments as raw words after its selector (see the contract): an
ABI-decoded struct of byte strings would cost it hundreds of traced steps.

Solidity's `abi.encodeCall` is the canonical ABI encoding, so the bytes built here are the
bytes the EntryPoint sends: the factory, account and paymaster see the same calldata, and so
run the same code, as under `simulateValidation` or `handleOps`.
"""

from __future__ import annotations

from dataclasses import dataclass

from eth_abi.abi import encode

from entryway.domain.evm import address_bytes, keccak
from entryway.domain.userop import UserOperation

PACKED_USER_OPERATION = "(address,uint256,bytes,bytes,bytes32,uint256,bytes32,bytes,bytes)"
CREATE_SENDER = keccak(b"createSender(bytes)")[:4]
VALIDATE_USER_OP = keccak(f"validateUserOp({PACKED_USER_OPERATION},bytes32,uint256)".encode())[:4]
VALIDATE_PAYMASTER_USER_OP = keccak(
    f"validatePaymasterUserOp({PACKED_USER_OPERATION},bytes32,uint256)".encode()
)[:4]
TRACE_VALIDATION = keccak(b"traceValidation()")[:4]


@dataclass(frozen=True, slots=True)
class ValidationCalls:
    """EntrywaySimulations.ValidationCalls: what traceValidation is to call, in order."""

    sender: str
    sender_creator: str
    factory_call: bytes  # empty when the sender exists
    account_call: bytes  # missingAccountFunds left 0: traceValidation sets it from the deposit
    verification_gas_limit: int
    required_prefund: int
    paymaster: str | None
    paymaster_call: bytes
    paymaster_verification_gas_limit: int

    @property
    def phases(self) -> int:
        """How many calls a successful validation makes."""
        return 1 + bool(self.factory_call) + (self.paymaster is not None)

    def calldata(self) -> bytes:
        """`traceValidation()` and its raw arguments: nine words, then the three calls."""
        words = (
            _address_word(self.sender),
            _address_word(self.sender_creator),
            _address_word(self.paymaster) if self.paymaster else bytes(32),
            *(
                n.to_bytes(32, "big")
                for n in (
                    self.verification_gas_limit,
                    self.paymaster_verification_gas_limit,
                    self.required_prefund,
                    len(self.factory_call),
                    len(self.account_call),
                    len(self.paymaster_call),
                )
            ),
        )
        return b"".join(
            (TRACE_VALIDATION, *words, self.factory_call, self.account_call, self.paymaster_call)
        )


def _address_word(address: str) -> bytes:
    return bytes(12) + address_bytes(address)


def validation_calls(op: UserOperation, op_hash: bytes, sender_creator: str) -> ValidationCalls:
    """The entity calls of a non-EIP-7702 op (an EIP-7702 op's initCode takes another path)."""
    if op.is_eip7702:
        raise ValueError("an EIP-7702 op is validated through simulateValidation's own trace")
    encoded = op.abi_encoded()
    factory_call = CREATE_SENDER + encode(["bytes"], [op.init_code]) if op.factory else b""
    paymaster_call = b""
    if op.paymaster is not None:
        paymaster_call = _validation_call(
            VALIDATE_PAYMASTER_USER_OP, encoded, op_hash, op.required_prefund
        )
    return ValidationCalls(
        sender=op.sender,
        sender_creator=sender_creator,
        factory_call=factory_call,
        account_call=_validation_call(VALIDATE_USER_OP, encoded, op_hash, 0),
        verification_gas_limit=op.verification_gas_limit,
        required_prefund=op.required_prefund,
        paymaster=op.paymaster,
        paymaster_call=paymaster_call,
        paymaster_verification_gas_limit=op.paymaster_verification_gas_limit,
    )


def _validation_call(selector: bytes, encoded_op: bytes, op_hash: bytes, amount: int) -> bytes:
    """`selector(PackedUserOperation op, bytes32 userOpHash, uint256 amount)`: the op's offset
    (three head words), the hash, the amount, then the op."""
    return selector + (96).to_bytes(32, "big") + op_hash + amount.to_bytes(32, "big") + encoded_op
