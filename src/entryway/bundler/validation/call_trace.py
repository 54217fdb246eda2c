"""ERC-7562 facts from what hosted nodes sell: `debug_traceCall` with geth's `callTracer` and
`prestateTracer` (plain, and with `{"diffMode": true}`), of the validation `trace.py` walks
(the replay at the EntryPoint's address, or `simulateValidation` itself). Phases are the
EntryPoint's direct calls, as there.

What the three answers show (geth's native tracers; anvil's agree where noted):
- callTracer: every CALL, CALLCODE, DELEGATECALL and STATICCALL with its target, value and
  input, precompile calls included (geth opens the frame before it looks for a precompile);
  a CREATE or CREATE2 frame, whose `to` is the new address and is left out when the creation
  failed; SELFDESTRUCT as a frame of its own; each frame's error ("out of gas", "execution
  reverted", "invalid opcode: INVALID", ...).
- prestateTracer: each account the run touched (call, EXTCODE* and BALANCE targets, created
  addresses) with its code, and every slot SLOADed or SSTOREd with its value before the run,
  under the storage owner (a DELEGATECALL's slots are its caller's). geth leaves out accounts
  empty before the run (no code, nonce or balance), so a contract the run created is there
  only in the diff; anvil lists them (`{"balance": "0x0"}`).
- diffMode: only accounts the run changed, and in them only the slots whose value differs at
  the end (`pre` keeps a nonzero old value, `post` a nonzero new one); created contracts
  appear in `post` with their code.

What no answer shows: opcodes (ORIGIN, TIMESTAMP, GAS, BALANCE, SELFBALANCE, EXTCODE*, ...),
transient storage, memory, and which frame touched a slot. Hence, here:
- A slot is judged in every phase in which its contract ran as a storage owner. A contract
  used by two phases (a token both the account and the paymaster read) has each of its slots
  judged in both: conservative, it may refuse an op the struct logger accepts.
- A write is a slot whose value changed. A write of the value already there, a write undone
  later in the run, or one in a frame that reverted, is taken for a read.
- No KECCAK256 input is seen, so association (STO-021, STO-022, STO-032) is proved by
  hashing guesses: for each entity A (sender, factory, paymaster), `A || x` for x a mapping's
  slot index 0..127, or a 32-byte constant (PUSH32) of the code that ran as the slot's owner,
  with the 15 slots after a constant ending in 0x00 (an ERC-7201 namespace root and its
  fields). A guess is kept when a touched slot lies within 0..128 of its hash, so
  `rules._is_associated` reads the kept ones unchanged. This proves `mapping(address => ...)`
  at a small or namespaced slot, with struct values up to 128 slots long. It cannot prove a
  nested mapping (`m[A][k]`, whose slot hashes `k` with `keccak(A || p)`; `m[k][A]`, whose `x`
  is `keccak(k || p)`), a mapping at a slot computed otherwise (a hashed constant the code
  does not hold, an index from 128 up), or an array: such slots count as unassociated.

Errors are read in geth's words and in anvil's (revm's names: "CreateCollision",
"StackUnderflow", a bare "invalid opcode" for an unassigned one, "precompiled failed").
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from entryway.bundler.validation.rules import ASSOCIATED_SLOT_SPAN
from entryway.bundler.validation.trace import (
    CallAccess,
    OpcodeUse,
    Phase,
    PhaseTrace,
    StorageAccess,
    ValidationTrace,
)
from entryway.domain.evm import ZERO_ADDRESS, address_bytes, checksum, hex_to_bytes, keccak

ENVIRONMENT_OPCODES = (
    "ORIGIN, GASPRICE, BLOCKHASH, COINBASE, TIMESTAMP, NUMBER, PREVRANDAO, GASLIMIT, BASEFEE, "
    "BLOBHASH, BLOBBASEFEE"
)
# Rule id -> "" where this mode sees all the rule looks at, else what part it sees.
CALLS_MODE_RULES: Mapping[str, str] = {
    "OP-011": "partly: CREATE and SELFDESTRUCT (their frames), INVALID (its frame's error)",
    "OP-013": "an unassigned opcode that runs ends its frame with 'invalid opcode'",
    "OP-020": "frames that ran code; a precompile's failure is not counted",
    "OP-031": "",
    "OP-032": "",
    "OP-033": "",
    "EREP-060": "",
    "OP-041": "partly: *CALL to an address without code",
    "OP-042": "for *CALL",
    "OP-052": "",
    "OP-053": "",
    "OP-054": "partly: calls to the EntryPoint",
    "OP-061": "",
    "OP-062": "",
    "STO-010": "",
    "STO-021": "persistent storage; association proved for mappings keyed by the entity at a "
    "slot below 128 or at a 32-byte constant of the contract's code (ERC-7201), any other "
    "access refused",
    "STO-022": "as STO-021",
    "STO-031": "a contract's slots are judged in every phase it ran in",
    "STO-032": "as STO-021",
    "STO-033": "partly: a write that leaves the value unchanged, or is reverted, reads as a read",
    "STO-040": "mempool rule on the storage owners found",
    "STO-041": "mempool rule on the storage owners found",
    "COD-010": "code hashes of every account the prestate lists",
    "EREP-050": "from the simulation's result, not the trace",
}
# Rule id -> what this mode cannot see of it.
CALLS_MODE_UNCHECKED: Mapping[str, str] = {
    "OP-011": f"the environment opcodes {ENVIRONMENT_OPCODES}",
    "OP-012": "GAS",
    "OP-041": "EXTCODESIZE, EXTCODEHASH and EXTCODECOPY of an address without code",
    "OP-051": "EXTCODESIZE of the EntryPoint (no EXTCODE* is seen, so none needs allowing)",
    "OP-054": "EXTCODE* on the EntryPoint",
    "OP-070": "TLOAD and TSTORE",
    "OP-080": "BALANCE and SELFBALANCE",
    "STO-033": "writes that leave a slot's value as it was",
}

MAPPING_SLOTS = 128  # x in A || x: a mapping declared in the first 128 slots
NAMESPACE_FIELDS = 16  # slots from an ERC-7201 root tried as a mapping's slot
MOST_CONSTANTS = 32  # PUSH32 constants taken from one contract's code
CALL_TYPES = frozenset({"CALL", "CALLCODE", "DELEGATECALL", "STATICCALL"})
_SHARED_OWNER = frozenset({"DELEGATECALL", "CALLCODE"})
_WITH_VALUE = frozenset({"CALL", "CALLCODE"})
# Errors a frame ends with before any of its code ran: geth's words, then revm's.
_NOT_RUN = frozenset(
    {
        "insufficient balance for transfer", "max call depth exceeded",
        "contract address collision", "max initcode size exceeded", "nonce uint64 overflow",
        "CallTooDeep", "CreateCollision", "OutOfFunds", "CreateInitCodeSizeLimit",
        "NonceOverflow",
    }
)  # fmt: skip
_REVERTED = "execution reverted"
_INVALID_OPCODE = "invalid opcode"
_CREATED = object()  # on the walk's stack: the creation above it has finished


def calls_trace(
    call_frame: Mapping[str, Any],
    prestate: Mapping[str, Any],
    prestate_diff: Mapping[str, Any],
    *,
    entry_point: str,
    sender_creator: str,
    sender: str,
    paymaster: str | None,
) -> ValidationTrace:
    """The per-phase facts the three answers carry, `keccak_preimages` filled (see the
    module's docstring for what is seen and what is not)."""
    walk = _Walk(prestate, prestate_diff)
    targets = {checksum(sender_creator): Phase.FACTORY, checksum(sender): Phase.ACCOUNT}
    if paymaster is not None:
        targets.setdefault(checksum(paymaster), Phase.PAYMASTER)
    phases: dict[Phase, PhaseTrace] = {}
    factory = None
    for entry in call_frame.get("calls") or ():
        target = _to(entry)
        phase = targets.get(target or "") if entry.get("type") in CALL_TYPES else None
        if phase is None or target is None or not walk.runs_code(target):
            continue
        trace = phases.setdefault(phase, PhaseTrace(phase))
        walk.phase(trace, entry, target)
        if phase is Phase.FACTORY:
            factory = _factory_called_by(entry)
    walk.storage(phases)
    entities = [a for a in (checksum(sender), factory, paymaster and checksum(paymaster)) if a]
    preimages = walk.preimages(phases, entities, checksum(entry_point))
    return ValidationTrace(phases, keccak_preimages=preimages)


def code_hashes(prestate: Mapping[str, Any]) -> dict[str, bytes]:
    """keccak256 of each listed account's code before the run, by checksummed address: what
    COD-010 compares at the second validation, without reading the code again."""
    return {
        checksum(a): keccak(hex_to_bytes(account.get("code") or "0x"))
        for a, account in prestate.items()
    }


class _Walk:
    """The call tree walked in execution order, with what the prestate says of each account."""

    def __init__(self, prestate: Mapping[str, Any], diff: Mapping[str, Any]) -> None:
        self.codes = {checksum(a): _code(acc) for a, acc in prestate.items()}
        post = diff.get("post") or {}
        self.created_codes = {checksum(a): _code(acc) for a, acc in post.items() if "code" in acc}
        self.created: set[str] = set()
        self.read = _slots(prestate)
        self.written = _slots(diff.get("pre") or {})
        for address, slots in _slots(post).items():
            self.written.setdefault(address, set()).update(slots)
        self.owners: dict[Phase, set[str]] = {}
        self.code_run_as: dict[str, set[str]] = {}  # storage owner -> whose code ran as it

    def runs_code(self, address: str) -> bool:
        return bool(self.codes.get(address)) or address in self.created

    def phase(self, trace: PhaseTrace, entry: Mapping[str, Any], target: str) -> None:
        self._ran(trace.phase, target, target)
        self._halted(trace, entry, target)
        stack: list[Any] = [(c, target) for c in reversed(entry.get("calls") or ())]
        while stack:
            item = stack.pop()
            if item[0] is _CREATED:
                self.created.add(item[1])
                continue
            frame, caller = item
            owner = self._frame(trace, frame, caller)
            if owner is None:
                continue
            if frame.get("type") in ("CREATE", "CREATE2") and not frame.get("error"):
                stack.append((_CREATED, owner))
            stack.extend((c, owner) for c in reversed(frame.get("calls") or ()))

    def _frame(self, trace: PhaseTrace, frame: Mapping[str, Any], caller: str) -> str | None:
        """Record one frame; the storage owner its code ran as, or None if no code ran."""
        kind = frame.get("type")
        target = _to(frame)
        if kind in CALL_TYPES and target is not None:
            runs = self.runs_code(target)
            value = int(frame.get("value") or "0x0", 16) if kind in _WITH_VALUE else 0
            size = (len(frame.get("input") or "0x") - 2) // 2
            trace.calls.append(CallAccess(kind, caller, target, value, size, runs))
            if not runs:
                return None  # a precompile, or no code: no frame of code below it
            owner = caller if kind in _SHARED_OWNER else target
            self._ran(trace.phase, owner, target)
        elif kind in ("CREATE", "CREATE2"):
            trace.opcodes.append(OpcodeUse(kind, caller, None))
            if frame.get("error") in _NOT_RUN:
                return None
            owner = target or ZERO_ADDRESS  # left out when the creation failed
            if target is not None:
                self._ran(trace.phase, target, target)
                if kind == "CREATE2" and not frame.get("error"):
                    trace.created.append(target)
        elif kind == "SELFDESTRUCT":
            trace.opcodes.append(OpcodeUse(kind, caller, None))
            return None
        else:
            return None
        self._halted(trace, frame, owner)
        return owner

    def _ran(self, phase: Phase, owner: str, code_address: str) -> None:
        self.owners.setdefault(phase, set()).add(owner)
        self.code_run_as.setdefault(owner, set()).add(code_address)

    @staticmethod
    def _halted(trace: PhaseTrace, frame: Mapping[str, Any], owner: str) -> None:
        """A frame that ran code and ended neither by returning nor by reverting: OP-020 (the
        struct logger counts every such end, as here), and an invalid opcode's name."""
        error = frame.get("error")
        if not error or error.startswith(_REVERTED) or error in _NOT_RUN:
            return
        if error.startswith(_INVALID_OPCODE):
            name = error.removeprefix(_INVALID_OPCODE).removeprefix(": ").split(" (")[0]
            trace.opcodes.append(OpcodeUse(name or "(unassigned)", owner, None))
        trace.out_of_gas.append(owner)

    def storage(self, phases: Mapping[Phase, PhaseTrace]) -> None:
        """Each touched slot, in every phase whose frames ran as its owner."""
        for address in self.read.keys() | self.written.keys():
            written = self.written.get(address, set())
            slots = sorted(self.read.get(address, set()) | written)
            for phase, trace in phases.items():
                if address in self.owners.get(phase, ()):
                    trace.storage += [StorageAccess(address, s, s in written, False) for s in slots]

    def preimages(
        self, phases: Mapping[Phase, PhaseTrace], entities: list[str], entry_point: str
    ) -> list[bytes]:
        """The guesses `A || x` whose hash a touched slot lies just above (see the module).
        Hashed only when some slot is not the EntryPoint's or an entity's own."""
        skip = {entry_point, *entities}
        judged = [s for t in phases.values() for s in t.storage if s.address not in skip]
        if not judged:
            return []
        slots = sorted({s.slot for s in judged})
        constants: set[int] = set()
        for owner in {s.address for s in judged}:
            for address in self.code_run_as.get(owner, ()):
                constants.update(_namespace_guesses(self._code_of(address)))
        found = []
        for entity in entities:
            padded = bytes(12) + address_bytes(entity)
            guesses = zip(range(MAPPING_SLOTS), _mapping_slots(entity), strict=True)
            hashed = ((x, _slot_of(padded, x)) for x in constants - set(range(MAPPING_SLOTS)))
            for x, base in (*guesses, *hashed):
                at = bisect_left(slots, base)
                if at < len(slots) and slots[at] - base <= ASSOCIATED_SLOT_SPAN:
                    found.append(padded + x.to_bytes(32, "big"))
        return found

    def _code_of(self, address: str) -> bytes:
        return self.codes.get(address) or self.created_codes.get(address, b"")


def _factory_called_by(sender_creator: Mapping[str, Any]) -> str | None:
    """The factory: the SenderCreator's one call (`initCode`'s address, with its data). The
    trace is not told it, and STO-032 needs the factory's associated slots."""
    calls = [c for c in sender_creator.get("calls") or () if c.get("type") == "CALL"]
    return _to(calls[0]) if calls else None


def _to(frame: Mapping[str, Any]) -> str | None:
    to = frame.get("to")
    return checksum(to) if to else None


def _code(account: Mapping[str, Any]) -> bytes:
    return hex_to_bytes(account.get("code") or "0x")


def _slots(accounts: Mapping[str, Any]) -> dict[str, set[int]]:
    return {
        checksum(a): {int(slot, 16) for slot in acc["storage"]}
        for a, acc in accounts.items()
        if acc.get("storage")
    }


@lru_cache(maxsize=1024)
def _mapping_slots(entity: str) -> tuple[int, ...]:
    """keccak(A || x) for x in 0..127. Cached: paymasters and factories come back op after
    op (128 hashes cost about a millisecond)."""
    padded = bytes(12) + address_bytes(entity)
    return tuple(_slot_of(padded, x) for x in range(MAPPING_SLOTS))


def _slot_of(padded: bytes, x: int) -> int:
    return int.from_bytes(keccak(padded + x.to_bytes(32, "big")), "big")


def _namespace_guesses(code: bytes) -> Iterable[int]:
    for constant in _push32_constants(code):
        yield constant
        if constant & 0xFF == 0:  # an ERC-7201 root: the fields after it
            yield from range(constant + 1, constant + NAMESPACE_FIELDS)


@lru_cache(maxsize=1024)
def _push32_constants(code: bytes) -> tuple[int, ...]:
    """PUSH32 operands that may be a storage slot: not text (a revert message), not a mask,
    not a selector shifted to the top. Cached: the same contracts come back op after op, and
    the walk costs a millisecond for a large contract."""
    found: list[int] = []
    at, end = 0, len(code)
    while at < end and len(found) < MOST_CONSTANTS:
        op = code[at]
        if op == 0x7F and at + 33 <= end:
            word = code[at + 1 : at + 33]
            if _may_be_slot(word):
                found.append(int.from_bytes(word, "big"))
        at += op - 0x5E if 0x60 <= op <= 0x7F else 1
    return tuple(dict.fromkeys(found))


def _may_be_slot(word: bytes) -> bool:
    text = word.rstrip(b"\0")
    if all(0x20 <= b < 0x7F for b in text):
        return False  # text, or zero
    if not any(word[4:]):
        return False  # a 4-byte selector shifted left
    return len(set(word.hex()) - {"0", "f"}) > 0  # a mask is f's and 0's only
