"""The paymaster's signer and the paymasterAndData VerifyingPaymaster checks.

    paymasterAndData = paymaster (20) | verificationGasLimit (16) | postOpGasLimit (16)
                     | validUntil (6) | validAfter (6) | signature (65)

The signer signs (EIP-191) `VerifyingPaymaster.getHash(op, validUntil, validAfter)`, which
covers the op's fields with the paymaster's gas limits, the chain id and the paymaster's
address. Its key comes from a file or an environment variable, never from the database.

On EntryPoint v0.6 (VerifyingPaymasterV06) the op carries no paymaster gas limits, and the
signer signs `VerifyingPaymasterV06.getHash(op, validUntil, validAfter)` over the unpacked op:

    paymasterAndData = paymaster (20) | validUntil (6) | validAfter (6) | signature (65)

On EntryPoint v0.9 (VerifyingPaymasterV09) the signature moves into the release's
paymasterSignature suffix (domain/paymaster_signature.py), which the userOpHash leaves out:
`parallel` data, which the account may sign before the paymaster has.

    paymasterAndData = ... | validUntil (6) | validAfter (6)
                     | signature (65) | uint16(65) | magic (8)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from eth_account import Account
from eth_account.signers.local import LocalAccount

from entryway.domain.paymaster_signature import encode_paymaster_signature
from entryway.domain.signatures import (
    eth_signed_message_digest,
    paymaster_data,
    paymaster_digest,
    paymaster_digest_v06,
    sign_digest,
)
from entryway.domain.userop import UserOperation
from entryway.errors import ConfigurationError
from entryway.keys import load_key_file

SIGNER_KEY_ENV = "ENTRYWAY_PAYMASTER_SIGNER_KEY"
SIGNER_KEY_FILE_ENV = "ENTRYWAY_PAYMASTER_SIGNER_KEY_FILE"
UINT48_MAX = 2**48 - 1

# The stub's signature: a real low-s ECDSA signature (of an unrelated digest, by a key that is
# never a signer) with no zero byte. VerifyingPaymaster recovers *some* address from it and
# finds it is no signer: the final data's code path, at its length, with no more zero bytes
# than a real signature has, as ERC-7677 asks of stubs (so preVerificationGas holds).
STUB_SIGNATURE = bytes.fromhex(
    "bb67834b99237f6d9242e28ccc97545b1b8d04f8467339e0b19e1c342357b22e"
    "760e8c057dd5a343a124e0bab004571a812d53c3193c34d9fc3dcbd70c84a1d71b"
)


@dataclass(frozen=True, slots=True)
class ValidityWindow:
    """When the EntryPoint accepts the sponsorship: validAfter <= block time <= validUntil."""

    valid_until: int
    valid_after: int = 0

    def __post_init__(self) -> None:
        if not (0 <= self.valid_after <= UINT48_MAX and 0 <= self.valid_until <= UINT48_MAX):
            raise ValueError("validity bounds are uint48 timestamps")
        if self.valid_until and self.valid_until <= self.valid_after:
            raise ValueError("validUntil must come after validAfter")


def with_paymaster_gas(
    op: UserOperation, paymaster: str, verification_gas: int, post_op_gas: int
) -> UserOperation:
    """The op naming the paymaster and its gas limits (both signed over), data still empty."""
    return op.with_paymaster(paymaster, verification_gas, post_op_gas, b"")


def _with_signature(window: ValidityWindow, signature: bytes, parallel: bool) -> bytes:
    if parallel:
        return paymaster_data(
            window.valid_until, window.valid_after, encode_paymaster_signature(signature)
        )
    return paymaster_data(window.valid_until, window.valid_after, signature)


def sign_paymaster_data(
    private_key: bytes,
    op: UserOperation,
    chain_id: int,
    window: ValidityWindow,
    *,
    parallel: bool = False,
) -> bytes:
    """The paymaster-specific tail of paymasterAndData (window and signature) for `op`, which
    already names the paymaster and its gas limits; `parallel`: the signature in v0.9's
    paymasterSignature suffix."""
    if op.paymaster is None:
        raise ValueError("the op names no paymaster")
    digest = paymaster_digest(op, chain_id, op.paymaster, window.valid_until, window.valid_after)
    signature = sign_digest(private_key, eth_signed_message_digest(digest))
    return _with_signature(window, signature, parallel)


def sign_paymaster_data_v06(
    private_key: bytes, op: UserOperation, chain_id: int, window: ValidityWindow
) -> bytes:
    """The tail of a v0.6 op's paymasterAndData (window and signature) for `op`, which names
    the paymaster (its data still empty: v0.6 signs over no paymaster field)."""
    if op.paymaster is None:
        raise ValueError("the op names no paymaster")
    v06 = op.as_v06()
    digest = paymaster_digest_v06(
        v06, chain_id, op.paymaster, window.valid_until, window.valid_after
    )
    signature = sign_digest(private_key, eth_signed_message_digest(digest))
    return paymaster_data(window.valid_until, window.valid_after, signature)


def stub_paymaster_data(window: ValidityWindow, *, parallel: bool = False) -> bytes:
    """Data of the final data's length and code path, for gas estimation (never valid).
    `parallel`: its signed part (the window) is the final data's, for the account to sign."""
    return _with_signature(window, STUB_SIGNATURE, parallel)


class PaymasterSigner:
    """One signing key of the service. Rotating it means building a new one."""

    def __init__(self, account: LocalAccount) -> None:
        self._account = account

    @property
    def address(self) -> str:
        return str(self._account.address)

    def paymaster_data(
        self, op: UserOperation, chain_id: int, window: ValidityWindow, *, parallel: bool = False
    ) -> bytes:
        key = bytes(self._account.key)
        return sign_paymaster_data(key, op, chain_id, window, parallel=parallel)

    def paymaster_data_v06(self, op: UserOperation, chain_id: int, window: ValidityWindow) -> bytes:
        return sign_paymaster_data_v06(bytes(self._account.key), op, chain_id, window)

    def sponsor(
        self,
        op: UserOperation,
        *,
        chain_id: int,
        paymaster: str,
        window: ValidityWindow,
        verification_gas: int,
        post_op_gas: int,
        parallel: bool = False,
    ) -> UserOperation:
        draft = with_paymaster_gas(op, paymaster, verification_gas, post_op_gas)
        data = self.paymaster_data(draft, chain_id, window, parallel=parallel)
        return draft.with_paymaster(paymaster, verification_gas, post_op_gas, data)

    @classmethod
    def from_key(cls, key: str) -> PaymasterSigner:
        try:
            account: LocalAccount = Account.from_key(key.strip())
        except (ValueError, TypeError):
            raise ConfigurationError("the paymaster signer key is not a 32-byte hex key") from None
        return cls(account)

    @classmethod
    def load(
        cls, key_file: Path | None = None, env: Mapping[str, str] | None = None
    ) -> PaymasterSigner:
        """From `key_file`, else the file ENTRYWAY_PAYMASTER_SIGNER_KEY_FILE names, else the
        key in ENTRYWAY_PAYMASTER_SIGNER_KEY."""
        env = os.environ if env is None else env
        if key_file is None and env.get(SIGNER_KEY_FILE_ENV):
            key_file = Path(env[SIGNER_KEY_FILE_ENV])
        if key_file is not None:
            return cls(load_key_file(key_file))
        if env.get(SIGNER_KEY_ENV):
            return cls.from_key(env[SIGNER_KEY_ENV])
        raise ConfigurationError(
            f"no paymaster signer key: give a key file, {SIGNER_KEY_FILE_ENV} or {SIGNER_KEY_ENV}"
        )
