"""EVM primitives as pure functions: hashing, addresses, CREATE2, hex."""

from __future__ import annotations

import re
from functools import lru_cache

import rlp
from Crypto.Hash import keccak as _keccak

ZERO_ADDRESS = "0x0000000000000000000000000000000000000000"
_HEX_ADDRESS = re.compile(r"(?:0[xX])?[0-9a-fA-F]{40}")


def keccak(data: bytes) -> bytes:
    """Keccak-256 (pycryptodome directly: a fifth of eth_utils' cost per call, and the
    bundler hashes on every op)."""
    return _keccak.new(data=data, digest_bits=256).digest()


def checksum(address: str | bytes) -> str:
    """The EIP-55 form of a 20-byte address given as bytes or as 40 hex digits (0x or not)."""
    if isinstance(address, bytes):
        if len(address) != 20:
            raise ValueError(f"not a 20-byte address: {address!r}")
        return _eip55(address.hex())
    if not isinstance(address, str) or not _HEX_ADDRESS.fullmatch(address):
        raise ValueError(f"not a 20-byte address: {address!r}")
    return _eip55(address[-40:].lower())


@lru_cache(maxsize=65_536)
def _eip55(lower_hex: str) -> str:
    """Cached: a bundler checksums the same few addresses (EntryPoint, senders, paymasters)
    many times per op."""
    digest = keccak(lower_hex.encode()).hex()
    return "0x" + "".join(
        c.upper() if d in "89abcdef" else c for c, d in zip(lower_hex, digest[:40], strict=True)
    )


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
