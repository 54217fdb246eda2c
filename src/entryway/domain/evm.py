"""EVM primitives as pure functions: hashing, addresses, CREATE2, hex."""

from __future__ import annotations

import rlp
from eth_utils.address import to_checksum_address
from eth_utils.crypto import keccak as _keccak

ZERO_ADDRESS = "0x0000000000000000000000000000000000000000"


def keccak(data: bytes) -> bytes:
    return bytes(_keccak(data))


def checksum(address: str | bytes) -> str:
    return str(to_checksum_address(address))


def hex_to_bytes(value: str) -> bytes:
    return bytes.fromhex(value.removeprefix("0x"))


def to_hex(data: bytes) -> str:
    return "0x" + data.hex()


def address_bytes(address: str) -> bytes:
    raw = hex_to_bytes(address)
    if len(raw) != 20:
        raise ValueError(f"not a 20-byte address: {address!r}")
    return raw


def create2_address(deployer: str, salt: bytes, init_code: bytes) -> str:
    """The address CREATE2 gives `init_code` deployed by `deployer` with `salt` (EIP-1014)."""
    if len(salt) != 32:
        raise ValueError("a CREATE2 salt is 32 bytes")
    digest = keccak(b"\xff" + address_bytes(deployer) + salt + keccak(init_code))
    return checksum(digest[12:])


def create_address(deployer: str, nonce: int) -> str:
    """The address CREATE gives the `nonce`-th contract deployed by `deployer`."""
    return checksum(keccak(rlp.encode([address_bytes(deployer), nonce]))[12:])
