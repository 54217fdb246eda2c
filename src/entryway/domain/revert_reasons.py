"""Why a call reverted, in words: the revert data an account's execution (or a contract of
ours) returned, decoded as Solidity's `Error(string)`, `Panic(uint256)` or one of the custom
errors of the contracts given. An account's `ExecuteError(index, error)` (a batch's failing
call) is unwrapped: the reason names the call and decodes what it returned."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

# Solidity's panic codes (the language's documentation, "Panic via assert and Error via
# require").
PANICS: dict[int, str] = {
    0x00: "generic compiler panic",
    0x01: "assertion failed",
    0x11: "arithmetic overflow or underflow",
    0x12: "division or modulo by zero",
    0x21: "conversion to an enum out of range",
    0x22: "storage byte array incorrectly encoded",
    0x31: "pop() on an empty array",
    0x32: "array index out of bounds",
    0x41: "too much memory allocated",
    0x51: "call to a zero-initialised internal function",
}
NESTED_ERROR = "ExecuteError"  # (uint256 index, bytes error): our accounts' failing call
MAX_NESTING = 4


class DecodedErrorLike(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def args(self) -> tuple[object, ...]: ...


class ErrorDecoder(Protocol):
    """A contract's errors by selector (`entryway.contracts.abi.ContractAbi`)."""

    def decode_error(self, data: bytes) -> DecodedErrorLike | None: ...


@dataclass(frozen=True, slots=True)
class RevertReason:
    kind: str  # "error" (Error(string)), "panic", "custom", "empty" or "unknown"
    message: str  # what a person reads
    data: str  # the raw revert data, 0x-hex

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "message": self.message, "data": self.data}


def explain_revert(data: bytes, contracts: Sequence[ErrorDecoder] = ()) -> RevertReason:
    """The reason `data` gives, looked up in Solidity's own errors then in `contracts`'."""
    return _explain(data, contracts, 0)


def _explain(data: bytes, contracts: Sequence[ErrorDecoder], depth: int) -> RevertReason:
    raw = "0x" + data.hex()
    if not data:
        return RevertReason("empty", "reverted without a reason", raw)
    for contract in contracts:
        found = contract.decode_error(data)
        if found is None:
            continue
        if found.name == "Error" and found.args:
            return RevertReason("error", str(found.args[0]), raw)
        if found.name == "Panic" and found.args and isinstance(found.args[0], int):
            code = found.args[0]
            meaning = PANICS.get(code, "unknown panic code")
            return RevertReason("panic", f"panic 0x{code:02x}: {meaning}", raw)
        if found.name == NESTED_ERROR and len(found.args) == 2 and depth < MAX_NESTING:
            index, inner = found.args
            if isinstance(inner, bytes):
                cause = _explain(inner, contracts, depth + 1)
                return RevertReason(cause.kind, f"call {index} reverted: {cause.message}", raw)
        return RevertReason("custom", _render(found), raw)
    if len(data) < 4:
        return RevertReason("unknown", f"reverted with {len(data)} bytes of data", raw)
    return RevertReason("unknown", f"reverted with unknown error 0x{data[:4].hex()}", raw)


def _render(found: DecodedErrorLike) -> str:
    def one(value: object) -> str:
        if isinstance(value, bytes):
            return "0x" + value.hex()
        if isinstance(value, str) and not (value.startswith("0x") and len(value) == 42):
            return repr(value)  # a string argument, quoted; an address, bare
        return str(value)

    return f"{found.name}({', '.join(one(a) for a in found.args)})"
