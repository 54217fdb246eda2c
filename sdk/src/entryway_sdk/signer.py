"""Who signs: any object with an address that signs a 32-byte digest as it is (no EIP-191
prefix), as Entryway's SmartAccount recovers the userOpHash and the recovery digests.

An eth-account `LocalAccount` works unchanged (its `unsafe_sign_hash`); hardware wallets,
KMS keys and remote signers implement `Signer` (`sign_digest` may be a coroutine)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from functools import cache
from typing import Any, Protocol, runtime_checkable

from eth_account import Account

from entryway_sdk._hex import checksum, keccak


@runtime_checkable
class Signer(Protocol):
    """An ECDSA key: its address, and a 65-byte r‖s‖v signature of a raw 32-byte digest."""

    @property
    def address(self) -> str: ...

    def sign_digest(self, digest: bytes) -> bytes | Awaitable[bytes]: ...


@runtime_checkable
class HashSigningAccount(Protocol):
    """eth-account's `LocalAccount` shape: `unsafe_sign_hash(digest).signature`."""

    @property
    def address(self) -> str: ...

    def unsafe_sign_hash(self, message_hash: Any) -> Any: ...


SignerLike = Signer | HashSigningAccount


class _AccountSigner:
    def __init__(self, account: HashSigningAccount) -> None:
        self._account = account

    @property
    def address(self) -> str:
        return checksum(self._account.address)

    def sign_digest(self, digest: bytes) -> bytes:
        return bytes(self._account.unsafe_sign_hash(digest).signature)

    def __repr__(self) -> str:
        return f"Signer({self.address})"


def as_signer(owner: SignerLike) -> Signer:
    """`owner` as a `Signer`: unchanged if it is one, wrapped if it is a `LocalAccount`."""
    if isinstance(owner, Signer):
        return owner
    if isinstance(owner, HashSigningAccount):
        return _AccountSigner(owner)
    raise TypeError(
        f"{type(owner).__name__} is no signer: give an eth-account LocalAccount or an object "
        "with `address` and `sign_digest(digest) -> bytes`"
    )


async def sign(signer: Signer, digest: bytes) -> bytes:
    """The signer's 65-byte signature of `digest`, with v as 27 or 28."""
    result = signer.sign_digest(digest)
    signature = await result if inspect.isawaitable(result) else result
    signature = bytes(signature)
    if len(signature) != 65:
        raise ValueError(f"a signature has 65 bytes (r, s, v), not {len(signature)}")
    if signature[64] in (0, 1):
        signature = signature[:64] + bytes([signature[64] + 27])
    return signature


@cache
def _dummy_account() -> Any:
    return Account.from_key(keccak(b"entryway-sdk: estimation only, never an owner"))


def dummy_signature(digest: bytes) -> bytes:
    """A well-formed signature by a key that owns nothing: gas estimation runs the account's
    real ECDSA recovery with it (then fails the owner check, as the bundler allows), so the
    estimate matches the signed op."""
    return bytes(_dummy_account().unsafe_sign_hash(digest).signature)
