"""Refusals explained in plain words with the fix: EntryPoint AAxx codes, ERC-7562 rule ids,
sponsorship-policy refusals, and the revert reasons of Error(string) and Panic."""

from __future__ import annotations

import pytest

from entryway.domain.explanations import explain, revert_reason


@pytest.mark.parametrize(
    ("message", "words"),
    [
        ("AA21 didn't pay prefund", "fund the account"),
        ("AA23 reverted: ECDSA: invalid signature", "validateUserOp reverted"),
        ("AA25 invalid account nonce", "getNonce(sender, key)"),
        ("AA33 reverted", "pm_getPaymasterData again"),
    ],
)
def test_entry_point_codes_say_what_failed_and_the_fix(message: str, words: str) -> None:
    text = explain(-32500, message)
    assert text is not None
    assert text.startswith(message[:4] + ": ")
    assert words in text and "Fix: " in text


def test_a_banned_opcode_names_the_rule_the_entity_and_the_opcode() -> None:
    text = explain(-32502, "account uses banned opcode: GASPRICE [OP-011]")
    assert text is not None
    assert text.startswith("OP-011: the account used a banned opcode (GASPRICE) during validation.")


def test_a_storage_rule_names_the_paymaster() -> None:
    text = explain(-32502, "paymaster accesses the storage of entity 0xab [STO-031]")
    assert text is not None
    assert text.startswith("STO-031: the paymaster accessed the storage of another entity")


def test_a_policy_refusal_says_which_rule_refused_and_what_to_change() -> None:
    data = {"rule": "allowed_targets", "policyId": "p1"}
    text = explain(-32501, "sponsorship refused (allowed_targets): target not allowed", data)
    assert text is not None
    assert "Sponsorship refused (allowed_targets)" in text and "allowed targets" in text


def test_a_code_alone_still_gets_a_sentence_and_plain_errors_get_none() -> None:
    expected = "The paymaster's deposit is too low: top it up on the EntryPoint."
    assert explain(-32508, "deposit too low") == expected
    assert explain(-32602, "invalid params") is None


def _error_string(text: str) -> str:
    raw = text.encode()
    body = (32).to_bytes(32, "big") + len(raw).to_bytes(32, "big") + raw.ljust(32, b"\0")
    return "0x08c379a0" + body.hex()


def test_revert_reasons_are_decoded_for_error_string_and_panic() -> None:
    assert revert_reason(_error_string("not the owner")) == 'Error("not the owner")'
    panic = "0x4e487b71" + (0x11).to_bytes(32, "big").hex()
    assert revert_reason(panic) == "Panic(0x11): arithmetic overflow or underflow"
    assert revert_reason("0xdeadbeef") is None
    assert revert_reason("0xzz") is None


def test_an_execution_revert_carries_its_decoded_reason() -> None:
    data = {"revertData": _error_string("transfer failed")}
    text = explain(-32521, "UserOperation execution reverted", data)
    assert text is not None and text.endswith('Revert reason: Error("transfer failed").')


def test_the_rule_in_data_is_explained_when_the_message_does_not_name_it() -> None:
    text = explain(-32502, "factory uses banned opcode: TIMESTAMP", {"rule": "OP-011"})
    assert text is not None
    assert text.startswith("OP-011: the factory used a banned opcode (TIMESTAMP)")


def test_a_revert_of_our_contracts_custom_error_is_named_in_the_explanation() -> None:
    from entryway.domain.evm import keccak
    from entryway.service.revert_text import revert_text

    data = {"revertData": "0x" + keccak(b"NoPendingRecovery()")[:4].hex()}
    text = explain(-32521, "UserOperation execution reverted", data, revert_text)
    assert text is not None and "Revert reason: NoPendingRecovery()." in text
    # Without the service's decoder, only Solidity's own errors are read.
    plain = explain(-32521, "UserOperation execution reverted", data)
    assert plain is None or "NoPendingRecovery" not in plain
