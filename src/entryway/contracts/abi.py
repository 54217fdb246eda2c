"""Encode calls and decode results, errors and events from a contract's JSON ABI."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eth_abi.abi import decode, encode

from entryway.domain.evm import checksum, keccak

AbiItem = Mapping[str, Any]

# Errors every Solidity contract may revert with.
_BUILTIN_ERRORS: tuple[AbiItem, ...] = (
    {"type": "error", "name": "Error", "inputs": [{"type": "string", "name": "message"}]},
    {"type": "error", "name": "Panic", "inputs": [{"type": "uint256", "name": "code"}]},
)


def abi_type(param: AbiItem) -> str:
    """The canonical type string of one ABI parameter, tuples spelled out."""
    kind = str(param["type"])
    if not kind.startswith("tuple"):
        return kind
    inner = ",".join(abi_type(c) for c in param["components"])
    return f"({inner}){kind[len('tuple') :]}"


def signature(item: AbiItem) -> str:
    return f"{item['name']}({','.join(abi_type(p) for p in item['inputs'])})"


def selector(item: AbiItem) -> bytes:
    return keccak(signature(item).encode())[:4]


def _normalise(value: Any) -> Any:
    """Addresses come back lower-case from eth-abi; return them checksummed."""
    if isinstance(value, tuple):
        return tuple(_normalise(v) for v in value)
    if isinstance(value, str) and value.startswith("0x") and len(value) == 42:
        return checksum(value)
    return value


@dataclass(frozen=True, slots=True)
class DecodedError:
    name: str
    args: tuple[Any, ...]

    def __str__(self) -> str:
        rendered = ", ".join(_render(a) for a in self.args)
        return f"{self.name}({rendered})"


def _render(value: Any) -> str:
    if isinstance(value, bytes):
        return "0x" + value.hex()
    if isinstance(value, tuple):
        return "(" + ", ".join(_render(v) for v in value) + ")"
    return repr(value) if isinstance(value, str) else str(value)


class ContractAbi:
    """The callable surface of one contract, looked up by name."""

    def __init__(self, abi: Sequence[AbiItem]) -> None:
        self._functions: dict[str, AbiItem] = {}
        self._events: dict[str, AbiItem] = {}
        self._errors: dict[bytes, AbiItem] = {selector(e): e for e in _BUILTIN_ERRORS}
        for item in abi:
            kind = item.get("type")
            if kind == "function":
                if item["name"] in self._functions:
                    raise ValueError(f"overloaded function {item['name']} is not supported")
                self._functions[item["name"]] = item
            elif kind == "event":
                self._events[item["name"]] = item
            elif kind == "error":
                self._errors[selector(item)] = item

    def function(self, name: str) -> AbiItem:
        try:
            return self._functions[name]
        except KeyError:
            raise KeyError(f"no function {name!r} in this ABI") from None

    def selector(self, name: str) -> bytes:
        return selector(self.function(name))

    def encode_call(self, name: str, *args: Any) -> bytes:
        item = self.function(name)
        types = [abi_type(p) for p in item["inputs"]]
        return selector(item) + encode(types, list(args))

    def decode_call(self, name: str, data: bytes) -> tuple[Any, ...]:
        item = self.function(name)
        if data[:4] != selector(item):
            raise ValueError(f"call data does not call {name}")
        types = [abi_type(p) for p in item["inputs"]]
        return tuple(_normalise(v) for v in decode(types, data[4:]))

    def decode_output(self, name: str, data: bytes) -> tuple[Any, ...]:
        types = [abi_type(p) for p in self.function(name)["outputs"]]
        return tuple(_normalise(v) for v in decode(types, data))

    def decode_error(self, data: bytes) -> DecodedError | None:
        item = self._errors.get(data[:4])
        if item is None:
            return None
        types = [abi_type(p) for p in item["inputs"]]
        try:
            args = tuple(_normalise(v) for v in decode(types, data[4:]))
        except Exception:  # malformed revert data: report the name alone
            args = ()
        return DecodedError(str(item["name"]), args)

    def event_topic(self, name: str) -> bytes:
        return keccak(signature(self._events[name]).encode())

    def decode_event(self, name: str, topics: Sequence[bytes], data: bytes) -> dict[str, Any]:
        """Decode one log of event `name` into its named arguments."""
        item = self._events[name]
        if not topics or topics[0] != self.event_topic(name):
            raise ValueError(f"log is not a {name} event")
        indexed = [p for p in item["inputs"] if p.get("indexed")]
        plain = [p for p in item["inputs"] if not p.get("indexed")]
        values: dict[str, Any] = {}
        for param, topic in zip(indexed, topics[1:], strict=True):
            (values[param["name"]],) = decode([abi_type(param)], topic)
        decoded = decode([abi_type(p) for p in plain], data)
        values.update({p["name"]: v for p, v in zip(plain, decoded, strict=True)})
        return {k: _normalise(v) for k, v in values.items()}
