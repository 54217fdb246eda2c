"""Wallet charges of sponsored ops (requirements §8.3) and the recovery model, without a chain:
what an op is charged for, that the charges ride in the sponsorship quote at an exact sum (the
same at hold and at settlement), the guardians' typed data, signatures and what a chain state
means."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from eth_abi.abi import encode
from eth_account import Account
from eth_account.messages import encode_typed_data
from hypothesis import given
from hypothesis import strategies as st

from entryway.domain.eip7702 import MARKER
from entryway.domain.evm import keccak
from entryway.domain.pricebook import OperationType, default_price_book
from entryway.domain.signatures import recovery_digest, sign_digest
from entryway.domain.userop import UserOperation
from entryway.domain.wallet_ops import (
    ADD_GUARDIAN,
    CANCEL_RECOVERY,
    FINALIZE_RECOVERY,
    REMOVE_GUARDIAN,
    SET_GUARDIAN_THRESHOLD,
    START_RECOVERY,
    WalletCharge,
    WalletChargeKind,
    classify,
)
from entryway.paymaster.calls import encode_execute, encode_execute_batch
from entryway.paymaster.costs import estimated_quote, max_gas_cost_wei, sponsorship_quote
from entryway.wallets.recovery import (
    SECP256K1_N,
    ChainRecovery,
    Recovery,
    RecoveryState,
    SignatureFormatError,
    StepState,
    Verdict,
    canonical_signature,
    judge,
    signer_of,
    typed_data,
)

ACCOUNT = "0x1111111111111111111111111111111111111111"
OTHER = "0x2222222222222222222222222222222222222222"
GUARDIAN = "0x3333333333333333333333333333333333333333"
FACTORY = "0x4444444444444444444444444444444444444444"
CHAIN = 80002
PRICES = default_price_book()

CREATION = WalletCharge(WalletChargeKind.ACCOUNT_CREATION)
GUARDIAN_CHANGE = WalletCharge(WalletChargeKind.GUARDIAN_MANAGEMENT, 1)


def recovery(confirmations: int) -> WalletCharge:
    return WalletCharge(WalletChargeKind.RECOVERY, confirmations)


def op(call_data: bytes = b"", **changes: Any) -> UserOperation:
    base = UserOperation(
        sender=ACCOUNT, nonce=0, call_data=call_data, call_gas_limit=100_000,
        verification_gas_limit=200_000, pre_verification_gas=50_000,
        max_fee_per_gas=40 * 10**9, max_priority_fee_per_gas=30 * 10**9,
    )  # fmt: skip
    return replace(base, **changes)


def add_guardian(guardian: str = GUARDIAN) -> bytes:
    return ADD_GUARDIAN + encode(["address"], [guardian])


def start_recovery(approvals: int) -> bytes:
    return START_RECOVERY + encode(["address", "bytes[]"], [OTHER, [b"\x01" * 65] * approvals])


def test_a_deployment_is_charged_account_creation_but_an_eip7702_marker_is_not() -> None:
    assert classify(op(factory=FACTORY, factory_data=b"\x01")) == (CREATION,)
    assert classify(op(factory=MARKER)) == ()
    assert classify(op()) == ()


def test_guardian_changes_count_only_when_the_account_calls_itself() -> None:
    assert classify(op(encode_execute(ACCOUNT, 0, add_guardian()))) == (GUARDIAN_CHANGE,)
    # The same call to another contract, or straight from the EntryPoint (it reverts NotSelf):
    assert classify(op(encode_execute(OTHER, 0, add_guardian()))) == ()
    assert classify(op(add_guardian())) == ()
    batch = encode_execute_batch(
        [
            (ACCOUNT, 0, add_guardian()),
            (ACCOUNT.lower(), 0, REMOVE_GUARDIAN + encode(["address"], [OTHER])),
            (OTHER, 0, add_guardian()),  # not the account: not charged
            (ACCOUNT, 0, SET_GUARDIAN_THRESHOLD + encode(["uint32"], [2])),
            (ACCOUNT, 0, b""),  # a plain transfer to itself
        ]
    )
    assert classify(op(batch)) == (GUARDIAN_CHANGE,) * 3
    deploy_and_guard = op(encode_execute(ACCOUNT, 0, add_guardian()), factory=FACTORY)
    assert classify(deploy_and_guard) == (CREATION, GUARDIAN_CHANGE)


def test_recovery_steps_count_their_guardian_confirmations() -> None:
    assert classify(op(start_recovery(3))) == (recovery(3),)
    assert classify(op(FINALIZE_RECOVERY)) == (recovery(0),)
    assert classify(op(encode_execute(ACCOUNT, 0, CANCEL_RECOVERY))) == (recovery(0),)
    assert classify(op(encode_execute(ACCOUNT, 0, start_recovery(2)))) == (recovery(2),)
    assert classify(op(START_RECOVERY + b"\x00" * 7)) == ()  # malformed: refused, not charged
    assert classify(op(encode_execute(ACCOUNT, 0, START_RECOVERY))) == ()


@given(st.binary(max_size=300))
def test_any_call_data_classifies_without_error(call_data: bytes) -> None:
    for prefix in (b"", START_RECOVERY, encode_execute(ACCOUNT, 0, b"")[:4]):
        classify(op(prefix + call_data))


def test_the_wallet_charges_ride_in_the_sponsorship_quote_as_components() -> None:
    batch = encode_execute_batch([(ACCOUNT, 0, add_guardian()), (ACCOUNT, 0, add_guardian(OTHER))])
    deploying = op(batch, factory=FACTORY, factory_data=b"\x01" * 10)
    quote = estimated_quote(PRICES, CHAIN, deploying)
    base = PRICES.sponsored_user_operation(
        CHAIN, calls=2, calldata_bytes=len(batch), gas_cost_wei=max_gas_cost_wei(deploying)
    )
    parts = dict(quote.breakdown)
    assert quote.operation is OperationType.SPONSORED_USER_OPERATION
    assert parts["account_creation"] == PRICES.account_creation == 1_000
    assert parts["guardian_management"] == 2 * (500 + 250)
    assert quote.credits == base.credits + 1_000 + 1_500 == sum(parts.values())
    start = estimated_quote(PRICES, CHAIN, op(start_recovery(2)))
    assert dict(start.breakdown)["recovery"] == 2_000 + 2 * 250
    plain = op(encode_execute(OTHER, 0, b""))
    assert estimated_quote(PRICES, CHAIN, plain) == PRICES.sponsored_user_operation(
        CHAIN, calls=1, calldata_bytes=len(plain.call_data), gas_cost_wei=max_gas_cost_wei(plain)
    )


@given(st.integers(0, 10**18), st.integers(0, 10**18), st.integers(0, 4))
def test_hold_and_settlement_carry_the_same_wallet_charges(
    estimate_wei: int, actual_wei: int, confirmations: int
) -> None:
    deploying = op(start_recovery(confirmations), factory=FACTORY)
    held = sponsorship_quote(PRICES, CHAIN, deploying, estimate_wei)
    settled = sponsorship_quote(PRICES, CHAIN, deploying, actual_wei)
    wallet = 1_000 + 2_000 + 250 * confirmations
    for quote, wei in ((held, estimate_wei), (settled, actual_wei)):
        base = PRICES.sponsored_user_operation(
            CHAIN, calls=1, calldata_bytes=len(deploying.call_data), gas_cost_wei=wei
        )
        assert quote.credits == base.credits + wallet == sum(c for _, c in quote.breakdown)
    assert held.credits - settled.credits == PRICES.gas_credits(
        CHAIN, estimate_wei
    ) - PRICES.gas_credits(CHAIN, actual_wei)


# ---------------------------------------------------------------------- the recovery model

GUARDIAN_KEY = Account.from_key(keccak(b"unit guardian"))
NOW = datetime(2026, 11, 21, 12, tzinfo=UTC)


def test_the_typed_data_hashes_to_the_digest_the_account_checks() -> None:
    data = typed_data(ACCOUNT, OTHER, 3, CHAIN)
    signed = Account.sign_message(encode_typed_data(full_message=data), GUARDIAN_KEY.key)
    digest = recovery_digest(ACCOUNT, OTHER, 3, CHAIN)
    assert signed.message_hash == digest
    assert signer_of(digest, canonical_signature(signed.signature)) == GUARDIAN_KEY.address
    assert signer_of(recovery_digest(ACCOUNT, OTHER, 4, CHAIN), signed.signature) != (
        GUARDIAN_KEY.address
    )


def test_signatures_are_made_canonical_or_refused() -> None:
    digest = keccak(b"approval")
    sig = sign_digest(bytes(GUARDIAN_KEY.key), digest)
    assert canonical_signature(sig) == sig
    r, s, v = sig[:32], int.from_bytes(sig[32:64], "big"), sig[64]
    high_s = r + (SECP256K1_N - s).to_bytes(32, "big") + bytes([55 - v])
    assert canonical_signature(high_s) == sig  # the same signature, written with the other s
    assert canonical_signature(sig[:64] + bytes([v - 27])) == sig  # v as 0/1
    for bad in (sig[:64], sig[:64] + b"\x05", r + bytes(32) + sig[64:]):
        with pytest.raises(SignatureFormatError):
            canonical_signature(bad)
    assert signer_of(digest, r + (1).to_bytes(32, "big") + b"\x1b") != GUARDIAN_KEY.address


def started(nonce: int = 5) -> Recovery:
    return Recovery(
        recovery_id="r1", project_id="p1", key_id=None, chain_id=CHAIN, account=ACCOUNT,
        new_owner=OTHER, recovery_nonce=nonce, threshold=1, guardians=(GUARDIAN,),
        state=RecoveryState.STARTED, created_at=NOW, updated_at=NOW, execute_after=1_000,
    )  # fmt: skip


def test_the_chain_state_tells_pending_finalized_and_cancelled_apart() -> None:
    owner = "0x5555555555555555555555555555555555555555"
    assert judge(started(), ChainRecovery(owner, 5, OTHER, 1_000)) is Verdict.PENDING
    assert judge(started(), ChainRecovery(OTHER, 6, None, 0)) is Verdict.FINALIZED
    assert judge(started(), ChainRecovery(owner, 6, None, 0)) is Verdict.CANCELLED
    # Cancelled, then another recovery started: ours is still cancelled.
    assert judge(started(), ChainRecovery(owner, 6, owner, 9_000)) is Verdict.CANCELLED


def test_step_states_follow_the_recovery() -> None:
    collecting = replace(started(), state=RecoveryState.COLLECTING, execute_after=None)
    assert (collecting.start_step(), collecting.finalize_step()) == (
        StepState.WAITING,
        StepState.WAITING,
    )
    starting = replace(collecting, state=RecoveryState.STARTING)
    assert starting.start_step() is StepState.QUEUED
    failed = replace(starting, state=RecoveryState.FAILED)
    assert (failed.start_step(), failed.finalize_step()) == (StepState.FAILED, StepState.SKIPPED)
    assert (started().start_step(), started().finalize_step()) == (
        StepState.DONE,
        StepState.QUEUED,
    )
    cancelled = replace(started(), state=RecoveryState.CANCELLED)
    assert cancelled.finalize_step() is StepState.SKIPPED
    late_failure = replace(started(), state=RecoveryState.FAILED)
    assert late_failure.finalize_step() is StepState.FAILED
    done = replace(started(), state=RecoveryState.FINALIZED)
    assert done.finalize_step() is StepState.DONE
