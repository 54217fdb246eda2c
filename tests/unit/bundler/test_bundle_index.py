"""A bundle's logs split among its ops in one pass (`index_bundle`): each op gets what its
execution emitted between the previous op's UserOperationEvent (or BeforeExecution) and its
own, and its revert reason; only the EntryPoint's own events mark the boundaries."""

from __future__ import annotations

from typing import Any

from eth_abi import encode

from entryway.bundler.receipts import (
    BEFORE_EXECUTION_EVENT,
    REVERT_REASON_EVENT,
    USER_OP_EVENT,
    index_bundle,
)
from entryway.domain.evm import to_hex

EP = "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108"
TOKEN = "0x" + "70" * 20
A, B, C = (bytes([n]) * 32 for n in (0xA, 0xB, 0xC))


class Logs:
    def __init__(self) -> None:
        self.logs: list[dict[str, Any]] = []

    def add(self, address: str, topics: list[bytes], data: bytes = b"") -> dict[str, Any]:
        log = {
            "address": address,
            "topics": [to_hex(t) for t in topics],
            "data": to_hex(data),
            "logIndex": hex(len(self.logs)),
        }
        self.logs.append(log)
        return log


def test_each_op_gets_the_logs_between_its_boundaries_and_its_reason() -> None:
    b = Logs()
    deployed = b.add(EP, [b"\x01" * 32])  # validation's events: before BeforeExecution
    b.add(EP.lower(), [BEFORE_EXECUTION_EVENT])  # the address in any case
    a_transfer = b.add(TOKEN, [b"\x02" * 32])
    a_event = b.add(EP, [USER_OP_EVENT, A])
    reverted = b.add(EP, [REVERT_REASON_EVENT, B], encode(["uint256", "bytes"], [0, b"nope"]))
    b_event = b.add(EP, [USER_OP_EVENT, B])
    look_alike = b.add(TOKEN, [USER_OP_EVENT, A])  # not the EntryPoint's: no boundary
    c_transfer = b.add(TOKEN, [b"\x03" * 32])
    c_event = b.add(EP.upper().replace("0X", "0x"), [USER_OP_EVENT, C])

    ops = index_bundle(b.logs, EP)

    assert set(ops) == {A, B, C}
    assert (ops[A].event, ops[A].logs, ops[A].reason) == (a_event, [a_transfer], "0x")
    assert (ops[B].event, ops[B].logs) == (b_event, [reverted])
    assert ops[B].reason == to_hex(b"nope")
    assert (ops[C].event, ops[C].logs, ops[C].reason) == (c_event, [look_alike, c_transfer], "0x")
    assert deployed not in ops[A].logs


def test_without_before_execution_the_first_op_takes_the_logs_from_the_start() -> None:
    b = Logs()
    first = b.add(TOKEN, [b"\x02" * 32])
    event = b.add(EP, [USER_OP_EVENT, A])
    assert index_bundle(b.logs, EP)[A].logs == [first]
    assert index_bundle(b.logs, TOKEN) == {}  # another EntryPoint's bundle: none of its ops
    assert index_bundle([event], EP)[A].logs == []
