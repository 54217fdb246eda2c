"""Guardians' recovery approvals: EIP-712 `RecoveryApproval(account, newOwner, recoveryNonce,
chainId)` signatures, which a guardian can make on their own device and hand to whoever
submits the recovery (the approvals, not the submitter, authorise it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from entryway_sdk._hex import address_bytes, checksum
from entryway_sdk.signer import SignerLike, as_signer, sign
from entryway_sdk.userop import recovery_digest


@dataclass(frozen=True, slots=True)
class RecoveryApproval:
    """One guardian's approval of `new_owner` for `account`, valid while the account's
    recovery nonce is `recovery_nonce` (a finalized or cancelled recovery voids it)."""

    account: str
    new_owner: str
    recovery_nonce: int
    chain_id: int
    guardian: str
    signature: bytes


async def sign_recovery_approval(
    guardian: SignerLike, account: str, new_owner: str, recovery_nonce: int, chain_id: int
) -> RecoveryApproval:
    """`guardian` signs the approval digest (as it is, no EIP-191 prefix)."""
    signer = as_signer(guardian)
    digest = recovery_digest(account, new_owner, recovery_nonce, chain_id)
    return RecoveryApproval(
        account=checksum(account),
        new_owner=checksum(new_owner),
        recovery_nonce=recovery_nonce,
        chain_id=chain_id,
        guardian=checksum(signer.address),
        signature=await sign(signer, digest),
    )


def ordered_signatures(
    approvals: Sequence[RecoveryApproval], account: str, new_owner: str, chain_id: int
) -> list[bytes]:
    """The signatures as `startRecovery` takes them: one per guardian, by guardian address
    ascending; every approval must be for this account, new owner and chain, under one nonce."""
    if not approvals:
        raise ValueError("a recovery needs at least one guardian approval")
    account, new_owner = checksum(account), checksum(new_owner)
    nonces = {a.recovery_nonce for a in approvals}
    for a in approvals:
        if (a.account, a.new_owner, a.chain_id) != (account, new_owner, chain_id):
            raise ValueError(
                f"the approval by {a.guardian} is for {a.new_owner} on {a.account} (chain "
                f"{a.chain_id}), not for {new_owner} on {account} (chain {chain_id})"
            )
    if len(nonces) > 1:
        raise ValueError(f"approvals under different recovery nonces: {sorted(nonces)}")
    by_guardian = {address_bytes(a.guardian): a.signature for a in approvals}
    if len(by_guardian) != len(approvals):
        raise ValueError("two approvals by one guardian count once: drop the duplicate")
    return [by_guardian[g] for g in sorted(by_guardian)]
