"""The contract interfaces the SDK calls, loaded from the ABI files shipped in the package
(copies of Entryway's compiled artifacts), and ABI encoding by function name."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from eth_abi.abi import decode, encode
from eth_abi.exceptions import DecodingError

from entryway_sdk._hex import keccak

_ERROR_STRING: dict[str, Any] = {"name": "Error", "inputs": [{"type": "string"}]}


def _type_of(param: dict[str, Any]) -> str:
    """The canonical ABI type of a parameter (tuples spelled out as `(…)`)."""
    kind = str(param["type"])
    if kind.startswith("tuple"):
        inner = ",".join(_type_of(c) for c in param["components"])
        return f"({inner}){kind[len('tuple') :]}"
    return kind


class ContractAbi:
    """One contract's functions, encoded and decoded by name."""

    def __init__(self, name: str, entries: list[dict[str, Any]]) -> None:
        self.name = name
        self._functions = {e["name"]: e for e in entries if e.get("type") == "function"}
        self._errors = [e for e in entries if e.get("type") == "error"]
        self._events = {e["name"]: e for e in entries if e.get("type") == "event"}

    def _function(self, fn: str) -> dict[str, Any]:
        try:
            return self._functions[fn]
        except KeyError:
            raise ValueError(f"{self.name} has no function {fn}") from None

    def input_types(self, fn: str) -> list[str]:
        return [_type_of(p) for p in self._function(fn)["inputs"]]

    def output_types(self, fn: str) -> list[str]:
        return [_type_of(p) for p in self._function(fn)["outputs"]]

    def signature(self, fn: str) -> str:
        return f"{fn}({','.join(self.input_types(fn))})"

    def selector(self, fn: str) -> bytes:
        return keccak(self.signature(fn).encode())[:4]

    def encode_call(self, fn: str, *args: Any) -> bytes:
        return self.selector(fn) + encode(self.input_types(fn), list(args))

    def decode_output(self, fn: str, data: bytes) -> tuple[Any, ...]:
        return tuple(decode(self.output_types(fn), data))

    def _event(self, name: str) -> dict[str, Any]:
        try:
            return self._events[name]
        except KeyError:
            raise ValueError(f"{self.name} has no event {name}") from None

    def event_topic(self, name: str) -> bytes:
        """topic0 of event `name`: the keccak of its signature."""
        types = ",".join(_type_of(p) for p in self._event(name)["inputs"])
        return keccak(f"{name}({types})".encode())

    def decode_event_data(self, name: str, data: bytes) -> dict[str, Any]:
        """The non-indexed arguments of event `name` from a log's data, by name."""
        params = [p for p in self._event(name)["inputs"] if not p.get("indexed")]
        values = decode([_type_of(p) for p in params], data)
        return {str(p["name"]): v for p, v in zip(params, values, strict=True)}

    def decode_error(self, data: bytes) -> tuple[str, tuple[Any, ...]] | None:
        """A custom error of this contract (or Solidity's `Error(string)`) from revert data:
        its name and arguments; None if it is none of them."""
        for error in [*self._errors, _ERROR_STRING]:
            types = [_type_of(p) for p in error["inputs"]]
            if data[:4] == keccak(f"{error['name']}({','.join(types)})".encode())[:4]:
                try:
                    return str(error["name"]), tuple(decode(types, data[4:]))
                except (DecodingError, ValueError):  # malformed: not this error after all
                    return None
        return None


@cache
def load(name: str) -> ContractAbi:
    """`SmartAccount`, `AccountFactory`, `EntryPoint` or `NotaryAnchor` (the functions and
    events the SDK uses)."""
    text = resources.files("entryway_sdk").joinpath("abi", f"{name}.json").read_text()
    return ContractAbi(name, json.loads(text))
