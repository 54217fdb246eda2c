"""Digests that Entryway's contracts verify, computed off chain, and signing them.

Each digest mirrors a view function on chain (`SmartAccount.recoveryDigest`,
`SmartAccount.messageDigest`, `VerifyingPaymaster.getHash`, `VerifyingPaymasterV06.getHash`);
tests hold them equal.
"""

from __future__ import annotations

from eth_abi.abi import encode
from eth_keys.datatypes import PrivateKey

from entryway.domain.evm import address_bytes, checksum, keccak
from entryway.domain.userop import UserOperation, eip712_domain_separator
from entryway.domain.userop_v06 import UserOperationV06

SMART_ACCOUNT_DOMAIN_NAME = b"EntrywaySmartAccount"
SMART_ACCOUNT_DOMAIN_VERSION = b"1"
RECOVERY_APPROVAL_TYPEHASH = keccak(
    b"RecoveryApproval(address account,address newOwner,uint256 recoveryNonce,uint256 chainId)"
)
MESSAGE_TYPEHASH = keccak(b"SmartAccountMessage(bytes32 hash)")


def sign_digest(private_key: bytes, digest: bytes) -> bytes:
    """A 65-byte r || s || v signature (v = 27/28), as OpenZeppelin's ECDSA expects."""
    sig = PrivateKey(private_key).sign_msg_hash(digest)
    r, s, v = int(sig.r), int(sig.s), int(sig.v)
    return r.to_bytes(32, "big") + s.to_bytes(32, "big") + bytes([v + 27])


def eth_signed_message_digest(digest: bytes) -> bytes:
    """EIP-191 personal-message hash of a 32-byte digest."""
    return keccak(b"\x19Ethereum Signed Message:\n32" + digest)


def _smart_account_domain(account: str, chain_id: int) -> bytes:
    return eip712_domain_separator(
        SMART_ACCOUNT_DOMAIN_NAME, SMART_ACCOUNT_DOMAIN_VERSION, chain_id, account
    )


def recovery_digest(account: str, new_owner: str, recovery_nonce: int, chain_id: int) -> bytes:
    """What a guardian signs to approve `new_owner` for `account` (EIP-712)."""
    struct = keccak(
        encode(
            ["bytes32", "address", "address", "uint256", "uint256"],
            [
                RECOVERY_APPROVAL_TYPEHASH,
                checksum(account),
                checksum(new_owner),
                recovery_nonce,
                chain_id,
            ],
        )
    )
    return keccak(b"\x19\x01" + _smart_account_domain(account, chain_id) + struct)


def message_digest(account: str, chain_id: int, message_hash: bytes) -> bytes:
    """What the owner signs so that `isValidSignature(message_hash, sig)` holds (ERC-1271)."""
    struct = keccak(encode(["bytes32", "bytes32"], [MESSAGE_TYPEHASH, message_hash]))
    return keccak(b"\x19\x01" + _smart_account_domain(account, chain_id) + struct)


def sort_approvals(approvals: dict[str, bytes]) -> list[bytes]:
    """Guardian approvals in the order `startRecovery` requires: by guardian address."""
    return [approvals[g] for g in sorted(approvals, key=lambda a: address_bytes(a))]


def paymaster_digest(
    op: UserOperation, chain_id: int, paymaster: str, valid_until: int, valid_after: int
) -> bytes:
    """`VerifyingPaymaster.getHash`: the op's fields (paymaster gas limits included, its
    signature and paymaster data excluded), the chain, the paymaster and the window."""
    pm_gas = op.paymaster_verification_gas_limit.to_bytes(
        16, "big"
    ) + op.paymaster_post_op_gas_limit.to_bytes(16, "big")
    return keccak(
        encode(
            [
                "address",
                "uint256",
                "bytes32",
                "bytes32",
                "bytes32",
                "bytes32",
                "uint256",
                "bytes32",
                "uint256",
                "address",
                "uint48",
                "uint48",
            ],
            [
                checksum(op.sender),
                op.nonce,
                keccak(op.init_code),
                keccak(op.call_data),
                op.account_gas_limits,
                pm_gas,
                op.pre_verification_gas,
                op.gas_fees,
                chain_id,
                checksum(paymaster),
                valid_until,
                valid_after,
            ],
        )
    )


def paymaster_digest_v06(
    op: UserOperationV06, chain_id: int, paymaster: str, valid_until: int, valid_after: int
) -> bytes:
    """`VerifyingPaymasterV06.getHash`: every field of the v0.6 op but paymasterAndData and
    signature, the chain, the paymaster and the window."""
    return keccak(
        encode(
            ["address", "uint256", "bytes32", "bytes32"]
            + ["uint256"] * 6
            + ["address", "uint48", "uint48"],
            [
                checksum(op.sender),
                op.nonce,
                keccak(op.init_code),
                keccak(op.call_data),
                op.call_gas_limit,
                op.verification_gas_limit,
                op.pre_verification_gas,
                op.max_fee_per_gas,
                op.max_priority_fee_per_gas,
                chain_id,
                checksum(paymaster),
                valid_until,
                valid_after,
            ],
        )
    )


def paymaster_data(valid_until: int, valid_after: int, signature: bytes) -> bytes:
    """The paymaster-specific tail of paymasterAndData."""
    return valid_until.to_bytes(6, "big") + valid_after.to_bytes(6, "big") + signature
