"""The price rules of requirements §8.3 for what is not a plain sponsored op: wallet operations
in an op that pays its own gas (charged once, in its relay charge, and shown as what they are)
and notarizations priced by their verification steps. Pure: no chain, no database."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from eth_abi.abi import encode
from hypothesis import given
from hypothesis import strategies as st

from entryway.domain.eip7702 import MARKER
from entryway.domain.merkle import MerkleTree
from entryway.domain.notarization import (
    HASH_BYTES,
    NewNotarization,
    NotarizationKind,
    request_quote,
    verification_steps,
)
from entryway.domain.pricebook import OperationType, default_price_book
from entryway.domain.userop import UserOperation
from entryway.domain.wallet_ops import ADD_GUARDIAN, FINALIZE_RECOVERY, START_RECOVERY
from entryway.paymaster.calls import encode_execute, encode_execute_batch
from entryway.paymaster.costs import estimated_quote, relay_quote

ACCOUNT = "0x1111111111111111111111111111111111111111"
OTHER = "0x2222222222222222222222222222222222222222"
FACTORY = "0x4444444444444444444444444444444444444444"
CHAIN = 80002
PRICES = default_price_book()
VALIDATION_AND_RELAY = PRICES.validation + PRICES.relay_per_call


def op(call_data: bytes = b"", **changes: Any) -> UserOperation:
    base = UserOperation(
        sender=ACCOUNT, nonce=0, call_data=call_data, call_gas_limit=100_000,
        verification_gas_limit=200_000, pre_verification_gas=50_000,
        max_fee_per_gas=40 * 10**9, max_priority_fee_per_gas=30 * 10**9,
    )  # fmt: skip
    return replace(base, **changes)


def add_guardian(guardian: str) -> bytes:
    return ADD_GUARDIAN + encode(["address"], [guardian])


def start_recovery(approvals: int) -> bytes:
    return START_RECOVERY + encode(["address", "bytes[]"], [OTHER, [b"\x01" * 65] * approvals])


# ------------------------------------------------------------ wallet ops paying their own gas


def test_a_self_paid_deploy_is_charged_account_creation_and_shown_as_one() -> None:
    quote = relay_quote(PRICES, CHAIN, op(factory=FACTORY, factory_data=b"\x01"), sponsored=False)
    assert quote.operation is OperationType.ACCOUNT_CREATION
    assert dict(quote.breakdown) == {
        "validation": PRICES.validation,
        "relay": PRICES.relay_per_call,
        "account_creation": PRICES.account_creation,
    }
    assert quote.credits == VALIDATION_AND_RELAY + 1_000


def test_a_self_paid_guardian_change_is_charged_per_change_and_its_signature() -> None:
    batch = encode_execute_batch([(ACCOUNT, 0, add_guardian(OTHER)), (ACCOUNT, 0, b"")])
    quote = relay_quote(PRICES, CHAIN, op(batch), sponsored=False)
    assert quote.operation is OperationType.GUARDIAN_MANAGEMENT
    assert dict(quote.breakdown)["guardian_management"] == 500 + 250
    assert quote.credits == VALIDATION_AND_RELAY + len(batch) + 750


def test_self_paid_recovery_steps_count_their_guardian_confirmations() -> None:
    start = relay_quote(PRICES, CHAIN, op(start_recovery(3)), sponsored=False)
    assert start.operation is OperationType.RECOVERY
    assert dict(start.breakdown)["recovery"] == 2_000 + 3 * 250
    finish = relay_quote(PRICES, CHAIN, op(FINALIZE_RECOVERY), sponsored=False)
    assert dict(finish.breakdown)["recovery"] == 2_000


def test_an_op_that_is_no_wallet_operation_pays_the_relay_alone() -> None:
    plain = op(encode_execute(OTHER, 0, b""))
    quote = relay_quote(PRICES, CHAIN, plain, sponsored=False)
    assert quote == PRICES.relayed_user_operation(
        calls=1, calldata_bytes=len(plain.call_data), sponsored=False
    )
    assert quote.operation is OperationType.RELAYED_USER_OPERATION
    # An EIP-7702 account names the marker, not a factory: nothing is deployed.
    delegated = relay_quote(PRICES, CHAIN, op(factory=MARKER), sponsored=False)
    assert delegated.operation is OperationType.RELAYED_USER_OPERATION


@given(st.booleans(), st.integers(0, 3), st.integers(0, 5))
def test_each_op_pays_its_wallet_fees_once_whoever_pays_its_gas(
    deploys: bool, guardian_changes: int, approvals: int
) -> None:
    calls = [(ACCOUNT, 0, add_guardian(OTHER))] * guardian_changes
    calls.append((ACCOUNT, 0, start_recovery(approvals)))
    user_op = op(encode_execute_batch(calls), factory=FACTORY if deploys else None)
    wallet = 1_000 * deploys + 750 * guardian_changes + 2_000 + 250 * approvals

    self_paid = relay_quote(PRICES, CHAIN, user_op, sponsored=False)
    assert self_paid.credits == VALIDATION_AND_RELAY + len(user_op.call_data) + wallet
    assert self_paid.credits == sum(c for _, c in self_paid.breakdown)
    first = "account_creation" if deploys else "guardian_management" if calls[1:] else "recovery"
    assert self_paid.operation.value == first

    # Sponsored: the sponsorship quote carries the wallet fees, the relay charge nothing.
    assert relay_quote(PRICES, CHAIN, user_op, sponsored=True).credits == 0
    held = estimated_quote(PRICES, CHAIN, user_op)
    fees = sum(c for k, c in held.breakdown if k in ("account_creation", "guardian_management"))
    assert fees + dict(held.breakdown)["recovery"] == wallet


# ---------------------------------------------------------- notarizations by their steps


def hashes(n: int) -> list[NewNotarization]:
    return [NewNotarization(bytes([i % 256, i // 256]) * 16, HASH_BYTES) for i in range(n)]


def test_a_single_hash_is_one_step_and_an_uploaded_document_two() -> None:
    (one,) = hashes(1)
    assert verification_steps(one, 1) == 1
    assert request_quote(PRICES, [one]).credits == 500 + 10 * 1
    document = replace(one, kind=NotarizationKind.DOCUMENT, data_bytes=2_500)
    assert verification_steps(document, 1) == 2
    assert request_quote(PRICES, [document]).credits == 500 + 10 * 3 * 2  # 3 KiB x 2 steps


def test_a_bulk_request_counts_its_trees_levels_per_item() -> None:
    three = request_quote(PRICES, hashes(3))
    assert three.credits == 3 * (500 + 10 * (1 + 2))
    assert dict(three.breakdown) == {"service": 1_500, "data": 90}
    assert request_quote(PRICES, hashes(1_000)).credits == 1_000 * (500 + 10 * (1 + 10))


@given(st.integers(1, 300))
def test_bulk_steps_are_one_plus_the_longest_proof_of_the_requests_tree(n: int) -> None:
    items = hashes(n)
    tree = MerkleTree.build([i.document_hash for i in items])
    longest = max(len(tree.path(i)) for i in range(n))
    assert all(verification_steps(item, n) == 1 + longest for item in items)
    quote = request_quote(PRICES, items)
    assert quote.credits == n * (PRICES.notarization + PRICES.notarization_per_kib * (1 + longest))
    assert quote.credits == sum(c for _, c in quote.breakdown)


@given(st.integers(1, 500), st.integers(1, 500))
def test_more_items_never_make_an_item_cheaper(smaller: int, extra: int) -> None:
    (item,) = hashes(1)
    assert verification_steps(item, smaller) <= verification_steps(item, smaller + extra)
