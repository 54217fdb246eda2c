"""Revert data put in words: Solidity's Error(string) and Panic(uint256), our contracts'
custom errors, a batch call's ExecuteError unwrapped, and data nobody declared."""

from __future__ import annotations

from eth_abi.abi import encode

from entryway import contracts
from entryway.domain.evm import keccak
from entryway.domain.revert_reasons import explain_revert
from entryway.service.revert_text import ERRORS

ACCOUNT = contracts.load("SmartAccount").abi


def _error(signature: str, types: list[str], *args: object) -> bytes:
    return keccak(signature.encode())[:4] + encode(types, list(args))


def test_error_string_is_its_message() -> None:
    data = _error("Error(string)", ["string"], "not enough tokens")
    reason = explain_revert(data, ERRORS)
    assert (reason.kind, reason.message, reason.data) == (
        "error",
        "not enough tokens",
        "0x" + data.hex(),
    )


def test_a_panic_names_its_code() -> None:
    reason = explain_revert(_error("Panic(uint256)", ["uint256"], 0x11), ERRORS)
    assert (reason.kind, reason.message) == (
        "panic",
        "panic 0x11: arithmetic overflow or underflow",
    )
    odd = explain_revert(_error("Panic(uint256)", ["uint256"], 0x99), ERRORS)
    assert odd.message == "panic 0x99: unknown panic code"


def test_our_accounts_custom_errors_are_named_with_their_arguments() -> None:
    data = _error("NotSelf(address)", ["address"], "0x" + "ab" * 20)
    reason = explain_revert(data, ERRORS)
    assert reason.kind == "custom"
    assert reason.message.startswith("NotSelf(0x") and reason.message.lower().endswith("ab)")
    assert explain_revert(_error("NoPendingRecovery()", []), ERRORS).message == (
        "NoPendingRecovery()"
    )


def test_a_batch_calls_failure_is_unwrapped() -> None:
    inner = _error("Error(string)", ["string"], "paused")
    data = _error("ExecuteError(uint256,bytes)", ["uint256", "bytes"], 2, inner)
    reason = explain_revert(data, ERRORS)
    assert (reason.kind, reason.message) == ("error", "call 2 reverted: paused")


def test_empty_short_and_unknown_data_still_say_something() -> None:
    assert explain_revert(b"", ERRORS).message == "reverted without a reason"
    assert explain_revert(b"\x01\x02", ERRORS).message == "reverted with 2 bytes of data"
    unknown = explain_revert(bytes.fromhex("deadbeef") + bytes(32), ERRORS)
    assert (unknown.kind, unknown.message) == ("unknown", "reverted with unknown error 0xdeadbeef")
    # Without any contract to look errors up in, not even Error(string) is guessed at.
    assert explain_revert(_error("Error(string)", ["string"], "x")).kind == "unknown"
