"""The calls a smart wallet makes, and their encoding as SmartAccount call data."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from entryway_sdk import abi
from entryway_sdk._hex import checksum, hex_bytes, quantity


@dataclass(frozen=True, slots=True)
class Call:
    """One call: `to`, `value` in wei, `data` (empty for a plain transfer)."""

    to: str
    value: int = 0
    data: bytes = b""

    def __post_init__(self) -> None:
        object.__setattr__(self, "to", checksum(self.to))
        if self.value < 0:
            raise ValueError("a call's value cannot be negative")


CallLike = Call | Mapping[str, Any]


def as_call(call: CallLike) -> Call:
    """A `Call` from a `Call` or a mapping {"to", "value"?, "data"?} (value an int or a
    quantity string, data bytes or 0x-hex)."""
    if isinstance(call, Call):
        return call
    if not isinstance(call, Mapping) or "to" not in call:
        raise TypeError(f"a call is a Call or a mapping with 'to', not {call!r}")
    unknown = set(call) - {"to", "value", "data"}
    if unknown:
        raise ValueError(f"unknown call field(s): {', '.join(sorted(unknown))}")
    return Call(
        to=str(call["to"]),
        value=quantity(call.get("value") or 0, "value"),
        data=hex_bytes(call.get("data") or b"", "data"),
    )


def as_calls(calls: CallLike | Sequence[CallLike]) -> list[Call]:
    if isinstance(calls, Call | Mapping):
        return [as_call(calls)]
    out = [as_call(c) for c in calls]
    if not out:
        raise ValueError("no calls to make")
    return out


def execute_call_data(calls: Sequence[Call]) -> bytes:
    """`execute(to, value, data)` for one call, `executeBatch((to, value, data)[])` for more."""
    account = abi.load("SmartAccount")
    if len(calls) == 1:
        call = calls[0]
        return account.encode_call("execute", call.to, call.value, call.data)
    return account.encode_call("executeBatch", [(c.to, c.value, c.data) for c in calls])


def self_call_data(account_address: str, fn: str, *args: Any) -> bytes:
    """The account calling one of its own `onlySelf` functions (guardian management)."""
    account = abi.load("SmartAccount")
    return account.encode_call("execute", account_address, 0, account.encode_call(fn, *args))
