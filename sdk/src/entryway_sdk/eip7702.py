"""EIP-7702: authorizations by which an EOA takes on a contract's code, signed by the EOA's own
key, and the delegation an EOA's code shows (`0xef0100 ‖ delegate`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from entryway_sdk._hex import ZERO_ADDRESS, address_bytes, checksum, keccak, quantity
from entryway_sdk.signer import Signer, sign

AUTHORIZATION_MAGIC = b"\x05"
DELEGATION_PREFIX = b"\xef\x01\x00"


def _rlp_item(payload: bytes) -> bytes:
    if len(payload) == 1 and payload[0] < 0x80:
        return payload
    return _rlp_length(len(payload), 0x80) + payload


def _rlp_length(length: int, offset: int) -> bytes:
    if length < 56:
        return bytes([offset + length])
    size = length.to_bytes((length.bit_length() + 7) // 8, "big")
    return bytes([offset + 55 + len(size)]) + size


def _rlp_uint(value: int) -> bytes:
    return _rlp_item(value.to_bytes((value.bit_length() + 7) // 8, "big"))


def authorization_digest(chain_id: int, delegate: str, nonce: int) -> bytes:
    """What the EOA signs: keccak(0x05 ‖ rlp([chain_id, delegate, nonce]))."""
    if chain_id < 0 or nonce < 0:
        raise ValueError("an authorization's chain id and nonce cannot be negative")
    body = _rlp_uint(chain_id) + _rlp_item(address_bytes(delegate)) + _rlp_uint(nonce)
    return keccak(AUTHORIZATION_MAGIC + _rlp_length(len(body), 0xC0) + body)


@dataclass(frozen=True, slots=True)
class Authorization:
    """A signed EIP-7702 authorization: the EOA (`authority`) takes `delegate`'s code on
    `chain_id` (0: any chain) when its account nonce is `nonce`. The zero address as
    `delegate` clears a delegation."""

    chain_id: int
    delegate: str
    nonce: int
    y_parity: int
    r: int
    s: int

    def to_rpc(self) -> dict[str, str]:
        """The JSON form of `eip7702Auth` and of a type-4 transaction's `authorizationList`."""
        return {
            "chainId": hex(self.chain_id),
            "address": checksum(self.delegate),
            "nonce": hex(self.nonce),
            "yParity": hex(self.y_parity),
            "r": hex(self.r),
            "s": hex(self.s),
        }

    @classmethod
    def from_rpc(cls, raw: Mapping[str, Any]) -> Authorization:
        return cls(
            chain_id=quantity(raw["chainId"], "chainId"),
            delegate=checksum(str(raw["address"])),
            nonce=quantity(raw["nonce"], "nonce"),
            y_parity=quantity(raw["yParity"], "yParity"),
            r=quantity(raw["r"], "r"),
            s=quantity(raw["s"], "s"),
        )


async def sign_authorization(
    signer: Signer, chain_id: int, delegate: str, nonce: int
) -> Authorization:
    """`signer`'s authorization to take `delegate`'s code (ZERO_ADDRESS: to drop any)."""
    signature = await sign(signer, authorization_digest(chain_id, delegate, nonce))
    r, s = int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:64], "big")
    return Authorization(chain_id, checksum(delegate), nonce, signature[64] - 27, r, s)


def delegate_of(code: bytes) -> str | None:
    """The address an EOA delegates to, as its code says; None when it delegates nowhere."""
    if len(code) == 23 and code.startswith(DELEGATION_PREFIX):
        delegate = checksum(code[3:])
        return None if delegate == checksum(ZERO_ADDRESS) else delegate
    return None
