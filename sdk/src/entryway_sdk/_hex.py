"""Hex and address helpers shared by the SDK's modules (the wire speaks 0x-hex)."""

from __future__ import annotations

from typing import Any

from eth_utils.address import to_checksum_address
from eth_utils.crypto import keccak as _keccak

ZERO_ADDRESS = "0x" + "00" * 20


def keccak(data: bytes) -> bytes:
    return bytes(_keccak(data))


def checksum(address: str | bytes) -> str:
    """The EIP-55 form of a 20-byte address (hex string or raw bytes)."""
    if isinstance(address, bytes):
        if len(address) != 20:
            raise ValueError(f"an address has 20 bytes, not {len(address)}")
        address = "0x" + address.hex()
    if not isinstance(address, str) or len(address) != 42 or not address.startswith("0x"):
        raise ValueError(f"not an address: {address!r}")
    return str(to_checksum_address(address))


def address_bytes(address: str) -> bytes:
    return bytes.fromhex(checksum(address)[2:])


def to_hex(data: bytes) -> str:
    return "0x" + data.hex()


def hex_bytes(value: Any, name: str = "value") -> bytes:
    """Bytes from `0x…` hex (or bytes as they are)."""
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    if isinstance(value, str) and value.startswith("0x") and len(value) % 2 == 0:
        try:
            return bytes.fromhex(value[2:])
        except ValueError:
            pass
    raise ValueError(f"{name}: expected 0x-prefixed hex bytes, got {value!r}")


def quantity(value: Any, name: str = "value") -> int:
    """An integer from a JSON-RPC quantity (`0x…`), a decimal string or an int."""
    if isinstance(value, bool):
        raise ValueError(f"{name}: expected a number, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value, 16) if value.startswith("0x") else int(value)
        except ValueError:
            pass
    raise ValueError(f"{name}: expected a number, got {value!r}")
