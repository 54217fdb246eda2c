"""The struct-log walk on hand-made traces: phases, frames, storage owners, CREATE2."""

from __future__ import annotations

from typing import Any

import orjson

from entryway.bundler.validation.struct_logs import ScannedSteps, decode_struct_logs
from entryway.bundler.validation.trace import Phase, parse_struct_logs

EP = "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108"
CREATOR = "0x449ED7C3e6Fee6a97311d4b55475DF59C44AdD33"
SENDER = "0x1111111111111111111111111111111111111111"
HELPER = "0x2222222222222222222222222222222222222222"
LIB = "0x3333333333333333333333333333333333333333"
PAYMASTER = "0x4444444444444444444444444444444444444444"


def word(value: int | str) -> str:
    return hex(int(value, 16) if isinstance(value, str) else value)


def step(op: str, depth: int, *stack: int | str, **extra: Any) -> dict[str, Any]:
    return {"op": op, "depth": depth, "stack": [word(v) for v in stack], **extra}


def call(op: str, depth: int, target: str, value: int = 0, args_size: int = 4) -> dict[str, Any]:
    # Stack bottom to top: ..., argsSize, argsOffset, value, address, gas
    if op in ("CALL", "CALLCODE"):
        return step(op, depth, 0, 0, args_size, 0, value, target, 50_000)
    return step(op, depth, 0, 0, args_size, 0, target, 50_000)


def as_node_answer(steps: list[dict[str, Any]]) -> bytes:
    """The steps as anvil's struct logger writes them in a debug_traceCall answer."""
    logs = [
        {"pc": i, "op": s["op"], "gas": 90_000 - i, "gasCost": 3, "depth": s["depth"]}
        | {k: v for k, v in s.items() if k not in ("op", "depth")}
        | {"refund": 0}
        for i, s in enumerate(steps)
    ]
    result = {"failed": False, "gas": 21_000, "returnValue": "0x", "structLogs": logs}
    return orjson.dumps({"jsonrpc": "2.0", "id": 7, "result": result})


def walk(steps: list[dict[str, Any]], paymaster: str | None = None) -> Any:
    """The walk over the decoded steps, which must find what the walk over the scanned
    answer finds (the bundler's way of reading a node's trace)."""
    where = {"entry_point": EP, "sender_creator": CREATOR, "sender": SENDER}
    decoded = parse_struct_logs(steps, paymaster=paymaster, **where)
    answer = decode_struct_logs(as_node_answer(steps))
    scanned = answer["result"]["structLogs"]
    assert isinstance(scanned, ScannedSteps)
    assert parse_struct_logs(scanned, paymaster=paymaster, **where) == decoded
    return decoded


def test_a_scanned_answer_has_every_field_of_the_decoded_one() -> None:
    steps = [step("PUSH1", 1, 5), step("CALL", 1, 0, 1), step("ADD", 2, error="OutOfGas")]
    raw = as_node_answer(steps)
    scanned = decode_struct_logs(raw)
    assert isinstance(scanned["result"]["structLogs"], ScannedSteps)
    assert scanned["result"]["structLogs"].errored == {2}
    decoded = orjson.loads(raw)
    assert list(scanned["result"]["structLogs"]) == decoded["result"]["structLogs"]
    scanned["result"]["structLogs"] = decoded["result"]["structLogs"]
    assert scanned == decoded
    # Laid out otherwise (a step the scan cannot read): decoded whole, as before.
    odd = raw.replace(b'"op":"ADD","gas"', b'"op":"ADD","extra":1,"gas"')
    assert orjson.loads(odd) == decode_struct_logs(odd)
    assert isinstance(decode_struct_logs(odd)["result"]["structLogs"], list)


def test_account_phase_with_nested_helper_and_delegatecall() -> None:
    steps = [
        step("PUSH1", 1),
        call("CALL", 1, SENDER),  # the EntryPoint calls validateUserOp
        step("TIMESTAMP", 2),
        step("SLOAD", 2, 7),
        call("STATICCALL", 2, HELPER),
        step("GAS", 3),
        call("CALL", 3, "0x0000000000000000000000000000000000000009"),  # precompile: no frame
        step("SLOAD", 3, 8),
        step("RETURN", 3),
        call("DELEGATECALL", 2, LIB),
        step("SSTORE", 3, 9),
        step("STOP", 3),
        step("RETURN", 2),
        step("STOP", 1),
    ]
    trace = walk(steps)
    account = trace.phase(Phase.ACCOUNT)
    assert list(trace.phases) == [Phase.ACCOUNT]
    assert [(u.opcode, u.frame_address, u.next_opcode) for u in account.opcodes] == [
        ("TIMESTAMP", SENDER, "SLOAD"),
        ("GAS", HELPER, "CALL"),
    ]
    # The helper's storage is its own; the library's writes land in the sender's storage.
    assert [(s.address, s.slot, s.write) for s in account.storage] == [
        (SENDER, 7, False),
        (HELPER, 8, False),
        (SENDER, 9, True),
    ]
    assert [(c.opcode, c.caller, c.target, c.entered) for c in account.calls] == [
        ("STATICCALL", SENDER, HELPER, True),
        ("CALL", HELPER, "0x0000000000000000000000000000000000000009", False),
        ("DELEGATECALL", SENDER, LIB, True),
    ]
    assert account.out_of_gas == []


def test_phases_split_by_the_entry_points_calls() -> None:
    steps = [
        call("CALL", 1, CREATOR),
        call("CALL", 2, "0x5555555555555555555555555555555555555555"),  # SenderCreator -> factory
        step("NUMBER", 3),
        step("RETURN", 3),
        step("RETURN", 2),
        call("CALL", 1, EP),  # validateSenderAndPaymaster self-call: ignored
        step("TIMESTAMP", 2),
        step("REVERT", 2),
        call("CALL", 1, SENDER),
        step("RETURN", 2),
        call("CALL", 1, PAYMASTER),
        step("BASEFEE", 2),
        step("RETURN", 2),
        step("STOP", 1),
    ]
    trace = walk(steps, paymaster=PAYMASTER)
    assert [u.opcode for u in trace.phase(Phase.FACTORY).opcodes] == ["NUMBER"]
    assert trace.phase(Phase.ACCOUNT).opcodes == []
    assert [u.opcode for u in trace.phase(Phase.PAYMASTER).opcodes] == ["BASEFEE"]


def test_create2_address_reaches_the_constructors_storage_and_out_of_gas_is_flagged() -> None:
    steps = [
        call("CALL", 1, CREATOR),
        call("CALL", 2, "0x5555555555555555555555555555555555555555"),
        step("CREATE2", 3, 0, 0, 0, 0),
        step("SSTORE", 4, 1),  # constructor writes before its address is known
        call("DELEGATECALL", 4, LIB),
        step("SSTORE", 5, 2),  # the library writes into the new account too
        step("RETURN", 5),
        step("RETURN", 4),
        step("SWAP1", 3, SENDER),  # the parent sees the new address on its stack
        call("CALL", 3, HELPER),
        step("ADD", 4, error="OutOfGas"),  # a frame cut short
        step("POP", 3),
        step("RETURN", 3),
        step("RETURN", 2),
        step("STOP", 1),
    ]
    factory = walk(steps).phase(Phase.FACTORY)
    assert [(s.address, s.slot) for s in factory.storage] == [(SENDER, 1), (SENDER, 2)]
    assert factory.created == [SENDER]
    assert [u.opcode for u in factory.opcodes] == ["CREATE2"]
    assert factory.out_of_gas == [HELPER]
