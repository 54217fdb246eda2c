"""Turns geth's native `erc7562Tracer` output into the per-phase facts the ERC-7562 rules read.

Why a second reader: nodes that offer geth's tracer (geth 1.16 and later, recent Erigon) do
the per-opcode work natively and answer with one small call tree, where the struct logger
sends every step. The facts given here are those `trace.parse_struct_logs` gives for the
same call, so `rules.check` judges both alike.

The tracer's answer is a call frame: `type`, `from`, `to` (dropped from a failed CREATE or
CREATE2), `gas`, `gasUsed`, `input`, `output`, `error`, `revertReason`, `value`, `calls`
(its child frames, in the order they ran), `outOfGas`, and what the frame itself did:
`usedOpcodes` (count by hex opcode, e.g. {"0x54": 2}), `accessedSlots` (`reads`: slot ->
[value at the first read], `writes`, `transientReads`, `transientWrites`: slot -> count),
`extCodeAccessInfo` (the target of each EXTCODE* but an EXTCODESIZE followed by ISZERO),
`contractSize` (address -> {contractSize, opcode} for the first EXTCODE* or *CALL of each
address). The outermost frame carries `keccak`, every KECCAK256 input of the call.

Phases are split as the struct-log reader splits them: by the outermost frame's calls to the
SenderCreator (factory), the sender (account) and the paymaster (paymaster); its other
calls, such as v0.8's self-call `validateSenderAndPaymaster`, are not judged. A frame's
storage owner is its `to`, or, for DELEGATECALL and CALLCODE, its `from`, the caller whose
storage it runs on.

What this format cannot say, and how each gap is bridged:
- The order of opcodes within a frame, and so the opcode after each one. The tracer itself
  counts GAS only when no call follows it (OP-012), and leaves out an EXTCODESIZE followed by
  ISZERO (OP-051), so the two rules that look at the next opcode are decided before the
  output is written: a GAS counted here has no call after it, and an EXTCODE* of the
  EntryPoint listed here is not OP-051's size check. The tracer also links nothing to a
  RETURN or REVERT: a GAS or EXTCODE* right before one is not reported at all.
- Which EXTCODE* opcode each listed access was: only the first access of an address in a
  frame is named (in `contractSize`); the others are reported as EXTCODESIZE.
- What EXTCODESIZE or EXTCODEHASH returned: the code size at the frame's first access of the
  address stands in. A hash is given only as "no code" (0) or unknown (None).
- Whether a call ran code at its target: `contractSize` at the caller's first access of it,
  or any work the child frame records (a contract created later in the same frame is seen
  by its own frame's work).
- Per-access counts: a slot read after a write in the same frame is not a read, and each slot
  is one access per kind; rules judge a slot by whether it was read or written, not how often.
- Which frames ended abnormally: those with an error other than a revert (`outOfGas`, an
  invalid opcode, a stack error) that ran code, as the struct-log reader sees them.
- The tracer's `ignoredOpcodes` option drops opcodes from `usedOpcodes`: a request that lists
  an opcode some rule watches hides it. The default list holds none of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from entryway.bundler.validation.trace import (
    ASSIGNED,
    CALLS,
    WATCHED,
    CallAccess,
    CodeAccess,
    OpcodeUse,
    Phase,
    PhaseTrace,
    StorageAccess,
    ValidationTrace,
)
from entryway.domain.evm import checksum, hex_to_bytes

ZERO_ADDRESS = checksum(bytes(20))
_REVERTED = "execution reverted"
# Calls geth refuses before running any code at the target.
_NOT_RUN = frozenset({"insufficient balance for transfer", "max call depth exceeded"})
_ANONYMOUS = {0x3B: "EXTCODESIZE", 0x3C: "EXTCODECOPY", 0x3F: "EXTCODEHASH"}


def _names() -> dict[int, str]:
    """Opcode names as the struct logger spells them (anvil calls 0x44 DIFFICULTY)."""
    names = {
        0x00: "STOP", 0x01: "ADD", 0x02: "MUL", 0x03: "SUB", 0x04: "DIV", 0x05: "SDIV",
        0x06: "MOD", 0x07: "SMOD", 0x08: "ADDMOD", 0x09: "MULMOD", 0x0A: "EXP",
        0x0B: "SIGNEXTEND", 0x10: "LT", 0x11: "GT", 0x12: "SLT", 0x13: "SGT", 0x14: "EQ",
        0x15: "ISZERO", 0x16: "AND", 0x17: "OR", 0x18: "XOR", 0x19: "NOT", 0x1A: "BYTE",
        0x1B: "SHL", 0x1C: "SHR", 0x1D: "SAR", 0x1E: "CLZ", 0x20: "KECCAK256",
        0x30: "ADDRESS", 0x31: "BALANCE", 0x32: "ORIGIN", 0x33: "CALLER", 0x34: "CALLVALUE",
        0x35: "CALLDATALOAD", 0x36: "CALLDATASIZE", 0x37: "CALLDATACOPY", 0x38: "CODESIZE",
        0x39: "CODECOPY", 0x3A: "GASPRICE", 0x3B: "EXTCODESIZE", 0x3C: "EXTCODECOPY",
        0x3D: "RETURNDATASIZE", 0x3E: "RETURNDATACOPY", 0x3F: "EXTCODEHASH",
        0x40: "BLOCKHASH", 0x41: "COINBASE", 0x42: "TIMESTAMP", 0x43: "NUMBER",
        0x44: "DIFFICULTY", 0x45: "GASLIMIT", 0x46: "CHAINID", 0x47: "SELFBALANCE",
        0x48: "BASEFEE", 0x49: "BLOBHASH", 0x4A: "BLOBBASEFEE", 0x50: "POP", 0x51: "MLOAD",
        0x52: "MSTORE", 0x53: "MSTORE8", 0x54: "SLOAD", 0x55: "SSTORE", 0x56: "JUMP",
        0x57: "JUMPI", 0x58: "PC", 0x59: "MSIZE", 0x5A: "GAS", 0x5B: "JUMPDEST",
        0x5C: "TLOAD", 0x5D: "TSTORE", 0x5E: "MCOPY", 0x5F: "PUSH0",
        0xF0: "CREATE", 0xF1: "CALL", 0xF2: "CALLCODE", 0xF3: "RETURN", 0xF4: "DELEGATECALL",
        0xF5: "CREATE2", 0xFA: "STATICCALL", 0xFD: "REVERT", 0xFE: "INVALID",
        0xFF: "SELFDESTRUCT",
    }  # fmt: skip
    names.update({0x5F + n: f"PUSH{n}" for n in range(1, 33)})
    names.update({0x7F + n: f"DUP{n}" for n in range(1, 17)})
    names.update({0x8F + n: f"SWAP{n}" for n in range(1, 17)})
    names.update({0x9F + n: f"LOG{n}" for n in range(5)})
    return names


OPCODE_NAMES = _names()


def opcode_name(number: int) -> str:
    """The struct logger's name for an opcode; geth's words for one that is not assigned."""
    return OPCODE_NAMES.get(number, f"opcode {number:#x} not defined")


def _address(value: str) -> str:
    return checksum(value)


def _owner(frame: Mapping[str, Any], parent_owner: str) -> str:
    """Whose storage the frame runs on: a DELEGATECALL or CALLCODE runs on its caller's."""
    if frame.get("type") in ("DELEGATECALL", "CALLCODE"):
        return _address(frame["from"]) if frame.get("from") else parent_owner
    to = frame.get("to")
    return _address(to) if to else ZERO_ADDRESS  # a failed CREATE has no address


def _did_work(frame: Mapping[str, Any]) -> bool:
    slots = frame.get("accessedSlots") or {}
    return bool(
        frame.get("usedOpcodes")
        or frame.get("calls")
        or frame.get("extCodeAccessInfo")
        or frame.get("contractSize")
        or any(slots.get(kind) for kind in ("reads", "writes", "transientReads", "transientWrites"))
    )


def _entered(child: Mapping[str, Any], caller: Mapping[str, Any]) -> bool:
    """Whether code ran at the child's target: work its frame records (precompiles and
    accounts without code record none), or its code size when the caller first looked at it
    (code halted on its first opcode records no work)."""
    if _did_work(child):
        return True
    if child.get("error") in _NOT_RUN:
        return False
    seen = _sizes_by_address(caller).get(_address(child["to"])) if child.get("to") else None
    return seen is not None and int(seen.get("contractSize", 0)) > 0


def _abnormal(frame: Mapping[str, Any], entered: bool) -> bool:
    error = frame.get("error") or ""
    return entered and (bool(frame.get("outOfGas")) or (error != "" and error != _REVERTED))


def _sizes_by_address(frame: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {_address(a): info for a, info in (frame.get("contractSize") or {}).items()}


def _code_accesses(frame: Mapping[str, Any], owner: str) -> Iterable[CodeAccess]:
    sizes = _sizes_by_address(frame)
    listed = [_address(a) for a in frame.get("extCodeAccessInfo") or ()]
    first_ext = [a for a, info in sizes.items() if int(info.get("opcode", 0)) in _ANONYMOUS]
    for target in dict.fromkeys([*listed, *first_ext]):
        info = sizes.get(target)
        number = int(info["opcode"]) if info is not None else 0
        opcode = _ANONYMOUS.get(number, "EXTCODESIZE")
        # Only EXTCODESIZE followed by ISZERO is left out of the list (OP-051).
        next_opcode = None if target in listed else "ISZERO"
        size = int(info["contractSize"]) if info is not None else None
        result: int | None = size
        if opcode == "EXTCODEHASH":
            result = 0 if size == 0 else None
        yield CodeAccess(opcode, owner, target, next_opcode, result)


def _storage(frame: Mapping[str, Any], owner: str) -> Iterable[StorageAccess]:
    slots = frame.get("accessedSlots") or {}
    kinds = (
        ("reads", False, False),
        ("writes", True, False),
        ("transientReads", False, True),
        ("transientWrites", True, True),
    )
    for kind, write, transient in kinds:
        for slot in slots.get(kind) or {}:
            yield StorageAccess(owner, int(slot, 16), write, transient)


def _opcodes(frame: Mapping[str, Any], owner: str) -> Iterable[OpcodeUse]:
    for key, count in (frame.get("usedOpcodes") or {}).items():
        number = int(key, 16) if isinstance(key, str) else int(key)
        name = opcode_name(number)
        if name in WATCHED or name not in ASSIGNED:
            # A GAS counted by the tracer had no call after it; nothing else needs a next op.
            yield from (OpcodeUse(name, owner, None) for _ in range(int(count)))


def _walk(frame: Mapping[str, Any], owner: str, trace: PhaseTrace) -> None:
    trace.opcodes.extend(_opcodes(frame, owner))
    trace.storage.extend(_storage(frame, owner))
    trace.code_accesses.extend(_code_accesses(frame, owner))
    for child in frame.get("calls") or ():
        kind = child.get("type", "")
        entered = _entered(child, frame)
        if kind in CALLS:
            with_value = kind in ("CALL", "CALLCODE")
            trace.calls.append(
                CallAccess(
                    opcode=kind,
                    caller=owner,
                    target=_address(child["to"]),
                    value=int(child.get("value") or "0x0", 16) if with_value else 0,
                    args_size=len(hex_to_bytes(child.get("input") or "0x")),
                    entered=entered,
                )
            )
        child_owner = _owner(child, owner)
        if kind == "CREATE2" and child.get("to") and not child.get("error"):
            trace.created.append(child_owner)
        creates = kind in ("CREATE", "CREATE2")
        if _abnormal(child, entered or creates):
            trace.out_of_gas.append("(create)" if creates else child_owner)
        _walk(child, child_owner, trace)


def parse_native_trace(
    frame: Mapping[str, Any],
    *,
    entry_point: str,
    sender_creator: str,
    sender: str,
    paymaster: str | None,
) -> ValidationTrace:
    """The facts of one traced validation, read from an `erc7562Tracer` answer whose
    outermost frame is the EntryPoint."""
    targets = {_address(sender_creator): Phase.FACTORY, _address(sender): Phase.ACCOUNT}
    if paymaster is not None:
        targets.setdefault(_address(paymaster), Phase.PAYMASTER)
    phases: dict[Phase, PhaseTrace] = {}
    for child in frame.get("calls") or ():
        to = child.get("to")
        if child.get("type") not in CALLS or not to:
            continue
        phase = targets.get(_address(to))
        if phase is None or not _entered(child, frame):
            continue
        trace = phases.setdefault(phase, PhaseTrace(phase))
        owner = _owner(child, _address(entry_point))
        if _abnormal(child, True):
            trace.out_of_gas.append(owner)
        _walk(child, owner, trace)
    preimages = [hex_to_bytes(p) for p in frame.get("keccak") or ()]
    return ValidationTrace(phases, keccak_preimages=preimages)
