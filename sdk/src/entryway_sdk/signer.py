"""Who signs: any object with an address that signs a 32-byte digest as it is (no EIP-191
prefix), as Entryway's SmartAccount recovers the userOpHash and the recovery digests.

An eth-account `LocalAccount` works unchanged (its `unsafe_sign_hash`); hardware wallets,
KMS keys and remote signers implement `Signer` (`sign_digest` may be a coroutine).

An account the SDK did not make signs its own way: `UserOpHashSigner` is the callback it
gives, from the 32-byte userOpHash to the signature its validateUserOp accepts."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from eth_account import Account

from entryway_sdk._hex import checksum, keccak

if TYPE_CHECKING:  # userop imports this module (through eip7702): annotations only
    from entryway_sdk.userop import EntryPointVersion


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

UserOpHashSigner = Callable[[bytes], bytes | Awaitable[bytes]]
"""The account's signature of a userOpHash (sync or async): whatever its validateUserOp
checks, in its own format and length."""


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


async def sign_user_op_hash(sign_hash: UserOpHashSigner, digest: bytes) -> bytes:
    """What `sign_hash` answers for `digest`, awaited if it is a coroutine."""
    result = sign_hash(digest)
    signature = await result if inspect.isawaitable(result) else result
    if not isinstance(signature, bytes | bytearray) or not signature:
        raise TypeError(f"a userOpHash signer returns the signature's bytes, not {signature!r}")
    return bytes(signature)


def eip191_digest(message_hash: bytes) -> bytes:
    """The EIP-191 (`personal_sign`) digest of a 32-byte hash."""
    return keccak(b"\x19Ethereum Signed Message:\n32" + message_hash)


def personal_sign(owner: SignerLike) -> UserOpHashSigner:
    """A userOpHash signer for accounts that check their owner's EIP-191 signature of the
    hash, as EntryPoint v0.7's SimpleAccount (and LightAccount) do."""
    signer = as_signer(owner)

    async def sign_hash(user_op_hash: bytes) -> bytes:
        return await sign(signer, eip191_digest(user_op_hash))

    return sign_hash


def direct_sign(owner: SignerLike) -> UserOpHashSigner:
    """A userOpHash signer for accounts that check their owner's ECDSA signature of the hash
    itself, no prefix: the SimpleAccounts of EntryPoint v0.8 and v0.9, Entryway's
    SmartAccount."""
    signer = as_signer(owner)

    async def sign_hash(user_op_hash: bytes) -> bytes:
        return await sign(signer, user_op_hash)

    return sign_hash


def simple_account_signer(owner: SignerLike, version: EntryPointVersion) -> UserOpHashSigner:
    """How the reference SimpleAccount of EntryPoint release `version` wants its owner to sign
    the userOpHash: v0.6's and v0.7's recover an EIP-191 message of it (`personal_sign`), v0.8's
    and v0.9's the hash as it is (`direct_sign`)."""
    if version in ("0.6", "0.7"):
        return personal_sign(owner)
    if version in ("0.8", "0.9"):
        return direct_sign(owner)
    raise ValueError(f"unsupported EntryPoint version {version!r} (supported: 0.6, 0.7, 0.8, 0.9)")


@cache
def _dummy_account() -> Any:
    return Account.from_key(keccak(b"entryway-sdk: estimation only, never an owner"))


def dummy_signature(digest: bytes) -> bytes:
    """A well-formed signature by a key that owns nothing: gas estimation runs the account's
    real ECDSA recovery with it (then fails the owner check, as the bundler allows), so the
    estimate matches the signed op."""
    return bytes(_dummy_account().unsafe_sign_hash(digest).signature)
