"""A social recovery run by the service, as data: its states, its guardians' approvals, the
EIP-712 typed data they sign, and what the chain says about it. Pure.

    collecting --threshold of approvals--> starting --startRecovery mined--> started
    started --finalizeRecovery mined--> finalized
    started --the owner cancelled on chain--> cancelled
    starting | started --an op refused or reverted--> failed
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from eth_keys.datatypes import Signature
from eth_keys.exceptions import BadSignature

from entryway.domain.evm import checksum
from entryway.domain.signatures import (
    SMART_ACCOUNT_DOMAIN_NAME,
    SMART_ACCOUNT_DOMAIN_VERSION,
    recovery_digest,
    sort_approvals,
)

SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141


class RecoveryState(StrEnum):
    COLLECTING = "collecting"  # waiting for guardians' approvals
    STARTING = "starting"  # threshold reached: the startRecovery op is being submitted
    STARTED = "started"  # pending on chain until executeAfter
    FINALIZED = "finalized"  # the new owner owns the account
    CANCELLED = "cancelled"  # the owner cancelled it on chain
    FAILED = "failed"  # an op was refused or reverted; `failure_reason` says why


FINAL_STATES = frozenset({RecoveryState.FINALIZED, RecoveryState.CANCELLED, RecoveryState.FAILED})


class StepState(StrEnum):
    WAITING = "waiting"  # an earlier step has not finished
    QUEUED = "queued"  # its task is queued (the finalize task: until executeAfter)
    SUBMITTED = "submitted"  # its UserOperation was sent, no receipt yet
    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"  # the recovery ended before it (cancelled, or the start failed)


@dataclass(frozen=True, slots=True)
class Approval:
    guardian: str
    signature: bytes  # 65 bytes, r || s || v, low s, v in {27, 28}
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Step:
    """One on-chain step: its task, the op submitted for it (serialised by the port) and the
    transaction that mined it."""

    task_id: str | None = None
    user_op_hash: str | None = None
    submission: str | None = None  # JSON, see wallets.ports.Submission
    transaction_hash: str | None = None


@dataclass(frozen=True, slots=True)
class Recovery:
    recovery_id: str
    project_id: str
    key_id: str | None
    chain_id: int
    account: str
    new_owner: str
    recovery_nonce: int  # the account's, when the recovery was opened: approvals bind to it
    threshold: int
    guardians: tuple[str, ...]
    state: RecoveryState
    created_at: datetime
    updated_at: datetime
    approvals: tuple[Approval, ...] = ()
    start: Step = Step()
    finalize: Step = Step()
    execute_after: int | None = None  # chain time (unix seconds) the recovery becomes final
    failure_reason: str | None = None

    @property
    def digest(self) -> bytes:
        return recovery_digest(self.account, self.new_owner, self.recovery_nonce, self.chain_id)

    @property
    def approved_by(self) -> tuple[str, ...]:
        return tuple(a.guardian for a in self.approvals)

    @property
    def threshold_reached(self) -> bool:
        return len(self.approvals) >= self.threshold

    def step(self, name: str) -> Step:
        """The "start" or "finalize" step."""
        return self.start if name == "start" else self.finalize

    def with_step(self, name: str, step: Step) -> Recovery:
        if name == "start":
            return replace(self, start=step)
        return replace(self, finalize=step)

    def sorted_approvals(self) -> list[bytes]:
        """In the order `startRecovery` requires: by guardian address, ascending."""
        return sort_approvals({a.guardian: a.signature for a in self.approvals})

    def start_step(self) -> StepState:
        if self.state is RecoveryState.COLLECTING:
            return StepState.WAITING
        if self.start.transaction_hash is not None or self.execute_after is not None:
            return StepState.DONE
        if self.state is RecoveryState.FAILED:
            return StepState.FAILED
        return StepState.SUBMITTED if self.start.submission else StepState.QUEUED

    def finalize_step(self) -> StepState:
        if self.state is RecoveryState.FINALIZED:
            return StepState.DONE
        if self.state is RecoveryState.STARTED:
            return StepState.SUBMITTED if self.finalize.submission else StepState.QUEUED
        if self.state is RecoveryState.FAILED and self.start_step() is StepState.DONE:
            return StepState.FAILED
        if self.state in FINAL_STATES:
            return StepState.SKIPPED
        return StepState.WAITING


def typed_data(account: str, new_owner: str, recovery_nonce: int, chain_id: int) -> dict[str, Any]:
    """The EIP-712 typed data a guardian signs (eth_signTypedData_v4's shape)."""
    return {
        "types": {
            "EIP712Domain": [
                {"name": "name", "type": "string"},
                {"name": "version", "type": "string"},
                {"name": "chainId", "type": "uint256"},
                {"name": "verifyingContract", "type": "address"},
            ],
            "RecoveryApproval": [
                {"name": "account", "type": "address"},
                {"name": "newOwner", "type": "address"},
                {"name": "recoveryNonce", "type": "uint256"},
                {"name": "chainId", "type": "uint256"},
            ],
        },
        "primaryType": "RecoveryApproval",
        "domain": {
            "name": SMART_ACCOUNT_DOMAIN_NAME.decode(),
            "version": SMART_ACCOUNT_DOMAIN_VERSION.decode(),
            "chainId": chain_id,
            "verifyingContract": checksum(account),
        },
        "message": {
            "account": checksum(account),
            "newOwner": checksum(new_owner),
            "recoveryNonce": recovery_nonce,
            "chainId": chain_id,
        },
    }


class SignatureFormatError(ValueError):
    pass


def canonical_signature(signature: bytes) -> bytes:
    """The form OpenZeppelin's ECDSA accepts: 65 bytes, low s, v 27 or 28. A high-s signature
    or v of 0/1 is the same signature written otherwise, and is rewritten; anything else is
    refused."""
    if len(signature) != 65:
        raise SignatureFormatError("a signature is 65 bytes: r, s and v")
    r, s, v = signature[:32], int.from_bytes(signature[32:64], "big"), signature[64]
    if v in (0, 1):
        v += 27
    if v not in (27, 28) or not 0 < s < SECP256K1_N:
        raise SignatureFormatError("v must be 27 or 28 and s within the curve order")
    if s > SECP256K1_N // 2:
        s, v = SECP256K1_N - s, 55 - v  # the other s of the same signature flips v
    return r + s.to_bytes(32, "big") + bytes([v])


def signer_of(digest: bytes, signature: bytes) -> str | None:
    """Who signed `digest` (a canonical signature), or None if it recovers to no one."""
    try:
        sig = Signature(signature[:64] + bytes([signature[64] - 27]))
        return checksum(sig.recover_public_key_from_msg_hash(digest).to_canonical_address())
    except (BadSignature, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class ChainRecovery:
    """What the account says now about its owner and recovery."""

    owner: str
    recovery_nonce: int
    pending_new_owner: str | None
    execute_after: int  # 0: nothing pending


class Verdict(StrEnum):
    PENDING = "pending"  # ours is still pending on chain
    FINALIZED = "finalized"
    CANCELLED = "cancelled"


def judge(recovery: Recovery, chain: ChainRecovery) -> Verdict:
    """What became of a started recovery. Finalizing and cancelling both move the recovery
    nonce on; only finalizing hands the account to the new owner."""
    if chain.recovery_nonce <= recovery.recovery_nonce:
        return Verdict.PENDING
    if chain.owner.lower() == recovery.new_owner.lower():
        return Verdict.FINALIZED
    return Verdict.CANCELLED
