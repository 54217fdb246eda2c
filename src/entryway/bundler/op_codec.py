"""How each EntryPoint release's ops look on the wire and in `handleOps`.

Inside the bundler every op is a `UserOperation`; a v0.6 op travels as one (its factory and
paymaster split from `initCode` and `paymasterAndData`, no paymaster gas limits) and takes its
own shape only at the edges: the JSON-RPC form a client sends and reads back, and the
`handleOps` calldata of EntryPoint v0.6.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from entryway import contracts
from entryway.bundler.errors import invalid_params
from entryway.bundler.rpc_types import parse_user_operation, user_operation_json
from entryway.contracts.abi import ContractAbi
from entryway.domain.entry_points import V06, EntryPointVersion, version_at
from entryway.domain.userop import UserOperation
from entryway.domain.userop_v06 import UserOperationV06, op_v06_from_json, op_v06_to_json

_PACKED_EP = contracts.load("EntryPoint").abi
_V06_EP = contracts.load(V06.artifact("EntryPoint")).abi
_V06_INNER_CALL_GAS = 5_000


@dataclass(frozen=True)
class OpCodec:
    version: EntryPointVersion
    abi: ContractAbi  # the release's EntryPoint

    def parse(self, raw: Any) -> UserOperation:
        """A client's op, checked strictly (invalid params naming the field at fault)."""
        if self.version is not EntryPointVersion.V06:
            return parse_user_operation(raw)
        if not isinstance(raw, dict):
            raise invalid_params("userOp must be an object")
        try:
            return UserOperation.from_v06(op_v06_from_json(raw))
        except ValueError as exc:
            raise invalid_params(f"invalid v0.6 userOp: {exc}") from None

    def to_json(self, op: UserOperation) -> dict[str, Any]:
        if self.version is EntryPointVersion.V06:
            return op_v06_to_json(op.as_v06())
        return user_operation_json(op)

    def bundle_gas(self, op: UserOperation) -> int:
        """The most gas the op may need of its bundle transaction. v0.6 reserves the
        verification gas once per entity, and before running the call it requires the call
        and verification gas, and 5,000 more, left over from what validation spent."""
        if self.version is EntryPointVersion.V06:
            return op.as_v06().max_gas + op.verification_gas_limit + _V06_INNER_CALL_GAS
        return op.max_gas

    def handle_ops(self, ops: Sequence[UserOperation], beneficiary: str) -> bytes:
        if self.version is EntryPointVersion.V06:
            structs: list[Any] = [op.as_v06().as_tuple() for op in ops]
        else:
            structs = [op.packed() for op in ops]
        return self.abi.encode_call("handleOps", structs, beneficiary)

    def ops_of_bundle(self, data: bytes) -> list[UserOperation] | None:
        """The ops of `handleOps` calldata to this EntryPoint; None if it is not that."""
        if data[:4] != self.abi.selector("handleOps"):
            return None
        (ops, _beneficiary) = self.abi.decode_call("handleOps", data)
        if self.version is EntryPointVersion.V06:
            return [UserOperation.from_v06(UserOperationV06(*op)) for op in ops]
        return [UserOperation.from_packed(op) for op in ops]


def codec_for(entry_point: str) -> OpCodec:
    version = version_at(entry_point)
    abi = _V06_EP if version is EntryPointVersion.V06 else _PACKED_EP
    return OpCodec(version, abi)
