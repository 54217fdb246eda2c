"""Whose code an op's validation is expected to use, before it runs (`CodeUsed`)."""

from __future__ import annotations

from dataclasses import replace

from entryway.bundler.validation.code_used import CodeUsed
from entryway.domain.userop import UserOperation


def _address(n: int) -> str:
    return "0x" + f"{n:02x}" * 20


def _op(sender: str, **fields: object) -> UserOperation:
    op = UserOperation(sender, 0, b"", 100_000, 100_000, 50_000, 10**9, 10**9)
    return replace(op, **fields)  # type: ignore[arg-type]


def test_a_sender_not_seen_yet_is_guessed_from_its_entities() -> None:
    sender, factory, paymaster = _address(1), _address(2), _address(3)
    assert CodeUsed().expected(_op(sender)) == {sender}
    # A sender its op deploys has no code to read yet.
    deploying = _op(sender, factory=factory, paymaster=paymaster)
    assert CodeUsed().expected(deploying) == {factory, paymaster}


def test_a_senders_last_admission_tells_what_its_next_will_use() -> None:
    sender, factory, implementation = _address(0xAB), _address(2), _address(4)
    used = CodeUsed()
    used.seen(_op(sender, factory=factory), {factory, implementation})
    other_case = "0x" + sender[2:].upper()  # the same sender, written otherwise
    assert other_case != sender
    assert used.expected(_op(other_case)) == {other_case, factory, implementation}


def test_the_least_recently_seen_senders_are_forgotten() -> None:
    used = CodeUsed(kept=2)
    first, implementation = _address(1), _address(4)
    used.seen(_op(first), {first, implementation})
    used.seen(_op(_address(5)), set())
    used.seen(_op(_address(6)), set())
    assert used.expected(_op(first)) == {first}


def test_a_long_list_is_not_remembered() -> None:
    used = CodeUsed()
    sender = _address(1)
    used.seen(_op(sender), {_address(n) for n in range(10, 10 + 100)})
    assert used.expected(_op(sender)) == {sender}
