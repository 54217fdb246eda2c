"""A mined op's depth as the SDK reads it: `confirmations` and `final` on its receipt and on
its status, absent (None) where the bundler does not report them."""

from __future__ import annotations

from entryway_sdk import OpStatus, UserOperationReceipt

from tests.sdk.test_waiting import HASH, RECEIPT, TX


def test_a_receipt_carries_its_confirmations_and_whether_it_is_final() -> None:
    receipt = UserOperationReceipt.parse({**RECEIPT, "confirmations": "0x3", "final": False})
    assert (receipt.block_number, receipt.confirmations, receipt.final) == (7, 3, False)
    deep = UserOperationReceipt.parse({**RECEIPT, "confirmations": "0x80", "final": True})
    assert (deep.confirmations, deep.final) == (128, True)


def test_a_receipt_without_depth_leaves_both_unknown() -> None:
    receipt = UserOperationReceipt.parse(RECEIPT)  # a bundler that does not report them
    assert (receipt.confirmations, receipt.final) == (None, None)
    assert receipt.transaction_hash == TX  # the ERC-4337 fields read as before


def test_an_op_status_carries_its_confirmations_and_finality() -> None:
    mined = OpStatus.parse(
        {
            "chainId": 80002,
            "userOpHash": HASH,
            "status": "included",
            "transactionHash": TX,
            "confirmations": "0x2",
            "final": True,
            "credits": 1040,
            "creditsFinal": True,
        }
    )
    assert (mined.status, mined.confirmations, mined.final) == ("included", 2, True)
    pending = OpStatus.parse({"status": "pending"}, 80002)
    assert (pending.confirmations, pending.final) == (None, None)
