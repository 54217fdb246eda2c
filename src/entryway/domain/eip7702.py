"""EIP-7702 in UserOperations: an EOA sender delegating to account code, by an authorization
the bundler carries into its (type 4) bundle transaction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import rlp
from eth_keys.datatypes import Signature

from entryway.domain.evm import address_bytes, checksum, keccak

# initCode starting with this 20-byte marker means "the sender is an EIP-7702 account";
# the rest of the initCode, if any, is a call the EntryPoint makes to initialise it.
MARKER = checksum("0x7702000000000000000000000000000000000000")
DELEGATION_PREFIX = b"\xef\x01\x00"
AUTHORIZATION_MAGIC = b"\x05"
# eth-infinitism's Simple7702Account (npm 0.8.0): the same address on every public chain.
SIMPLE_7702_ACCOUNT = checksum("0xe6Cae83BdE06E4c305530e199D7217f42808555B")


@dataclass(frozen=True, slots=True)
class Authorization:
    chain_id: int
    address: str
    nonce: int
    y_parity: int
    r: int
    s: int

    def digest(self) -> bytes:
        payload = rlp.encode([self.chain_id, address_bytes(self.address), self.nonce])
        return keccak(AUTHORIZATION_MAGIC + payload)

    def signer(self) -> str:
        signature = Signature(vrs=(self.y_parity, self.r, self.s))
        return checksum(
            signature.recover_public_key_from_msg_hash(self.digest()).to_canonical_address()
        )

    @property
    def delegation_code(self) -> bytes:
        return DELEGATION_PREFIX + address_bytes(self.address)

    def to_rpc(self) -> dict[str, Any]:
        return {
            "chainId": hex(self.chain_id),
            "address": self.address,
            "nonce": hex(self.nonce),
            "yParity": hex(self.y_parity),
            "r": hex(self.r),
            "s": hex(self.s),
        }


def delegate_of(code: bytes) -> str | None:
    """The address an EIP-7702 account delegates to, or None if `code` is no delegation."""
    if len(code) == 23 and code.startswith(DELEGATION_PREFIX):
        return checksum(code[3:])
    return None
