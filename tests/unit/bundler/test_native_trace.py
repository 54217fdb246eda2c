"""The reader of geth's erc7562Tracer answers, on hand-written frames in geth's format: the
phase split, each fact, storage owners through DELEGATECALL, CREATE2 results, abnormal ends;
and the rules' verdicts on what it reads."""

from __future__ import annotations

from typing import Any

from entryway.bundler.validation.native_trace import parse_native_trace
from entryway.bundler.validation.rules import Entities, RuleSettings, StakeInfo, check
from entryway.bundler.validation.trace import (
    CallAccess,
    CodeAccess,
    OpcodeUse,
    Phase,
    StorageAccess,
)
from entryway.domain.evm import checksum, keccak

EP = "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108"
CREATOR = "0x449ED7C3e6Fee6a97311d4b55475DF59C44AdD33"
SENDER = checksum("0xabcdef1111111111111111111111111111111111")
HELPER = "0x2222222222222222222222222222222222222222"
LIB = "0x3333333333333333333333333333333333333333"
PAYMASTER = "0x4444444444444444444444444444444444444444"
FACTORY = "0x5555555555555555555555555555555555555555"
NO_CODE = "0x000000000000000000000000000000000000dEaD"
ZERO = "0x0000000000000000000000000000000000000000"
SLOT = "0x" + "00" * 31 + "07"


def frame(
    kind: str, source: str, to: str | None, *calls: dict[str, Any], **fields: Any
) -> dict[str, Any]:
    """A call frame as geth writes it (addresses in lower case, numbers in hex)."""
    out: dict[str, Any] = {
        "from": source.lower(),
        "gas": "0x10000",
        "gasUsed": "0x100",
        "input": fields.pop("input", "0x"),
        "accessedSlots": {"reads": {}, "writes": {}, "transientReads": {}, "transientWrites": {}},
        "extCodeAccessInfo": [],
        "usedOpcodes": {},
        "contractSize": {},
        "outOfGas": False,
        "type": kind,
    }
    if to is not None:
        out["to"] = to.lower()
    if kind != "STATICCALL":
        out["value"] = "0x0"
    for key, value in fields.items():
        if key in ("reads", "writes", "transientReads", "transientWrites"):
            out["accessedSlots"][key] = value
        else:
            out[key] = value
    if calls:
        out["calls"] = list(calls)
    return out


def root(*calls: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return frame("CALL", ZERO, EP, *calls, **fields)


def sizes(**by_address: tuple[int, int]) -> dict[str, dict[str, int]]:
    return {a.lower(): {"contractSize": size, "opcode": op} for a, (size, op) in by_address.items()}


def read(answer: dict[str, Any], paymaster: str | None = None) -> Any:
    return parse_native_trace(
        answer, entry_point=EP, sender_creator=CREATOR, sender=SENDER, paymaster=paymaster
    )


def verdicts(answer: dict[str, Any], **who: Any) -> set[tuple[str, Phase]]:
    entities = Entities(
        entry_point=EP,
        sender=SENDER,
        factory=who.get("factory"),
        paymaster=who.get("paymaster"),
        sender_stake=StakeInfo(0, 0),
        factory_stake=StakeInfo(0, 0) if who.get("factory") else None,
        paymaster_stake=StakeInfo(0, 0) if who.get("paymaster") else None,
    )
    trace = read(answer, who.get("paymaster"))
    found = check(trace, entities, RuleSettings(min_stake_wei=10**18))
    return {(v.rule, v.phase) for v in found}


def account(**fields: Any) -> dict[str, Any]:
    """The EntryPoint calling validateUserOp with a frame made of `fields`."""
    calls = fields.pop("calls", ())
    work = {"usedOpcodes": {"0xf3": 1}} | fields
    return root(frame("CALL", EP, SENDER, *calls, **work))


def test_phases_follow_the_entry_points_calls_and_its_self_call_is_not_judged() -> None:
    answer = root(
        frame("CALL", EP, CREATOR, usedOpcodes={"0x43": 1}),  # NUMBER in createSender
        frame("CALL", EP, SENDER, usedOpcodes={"0x42": 2}),
        frame("CALL", EP, EP, usedOpcodes={"0x42": 1}),  # validateSenderAndPaymaster
        frame("CALL", EP, PAYMASTER, usedOpcodes={"0x3a": 1}),
        usedOpcodes={"0x42": 1},  # the EntryPoint's own TIMESTAMP
    )
    trace = read(answer, PAYMASTER)
    assert list(trace.phases) == [Phase.FACTORY, Phase.ACCOUNT, Phase.PAYMASTER]
    assert trace.phases[Phase.FACTORY].opcodes == [OpcodeUse("NUMBER", CREATOR, None)]
    assert trace.phases[Phase.ACCOUNT].opcodes == [OpcodeUse("TIMESTAMP", SENDER, None)] * 2
    assert trace.phases[Phase.PAYMASTER].opcodes == [OpcodeUse("GASPRICE", PAYMASTER, None)]
    assert read(answer).phase(Phase.PAYMASTER) is None  # no paymaster named: not a phase


def test_a_phase_whose_target_ran_no_code_is_not_traced() -> None:
    answer = root(frame("CALL", EP, SENDER))  # no work, no code seen
    assert read(answer).phases == {}


def test_opcodes_the_rules_watch_are_read_and_plain_ones_left_out() -> None:
    used = {"0x1": 9, "0x54": 1, "0x5a": 1, "0x31": 1, "0xc": 1, "0x44": 1, "0xf1": 1}
    trace = read(account(usedOpcodes=used))
    opcodes = trace.phases[Phase.ACCOUNT].opcodes
    assert sorted(u.opcode for u in opcodes) == [
        "BALANCE", "DIFFICULTY", "GAS", "opcode 0xc not defined"
    ]  # fmt: skip
    assert all(u.frame_address == SENDER and u.next_opcode is None for u in opcodes)
    assert verdicts(account(usedOpcodes=used)) == {
        ("OP-011", Phase.ACCOUNT),  # DIFFICULTY
        ("OP-012", Phase.ACCOUNT),  # the tracer counts GAS only when no call follows
        ("OP-013", Phase.ACCOUNT),
        ("OP-080", Phase.ACCOUNT),
    }


def test_storage_owner_is_the_caller_through_delegatecall_and_the_callee_through_call() -> None:
    library = frame(
        "DELEGATECALL", SENDER, LIB, writes={SLOT: 2}, transientWrites={SLOT: 1},
        usedOpcodes={"0x55": 2, "0x5d": 1},
    )  # fmt: skip
    helper = frame(
        "STATICCALL", SENDER, HELPER, reads={SLOT: ["0x" + "00" * 32]},
        transientReads={SLOT: 1}, usedOpcodes={"0x54": 1, "0x5c": 1},
    )  # fmt: skip
    storage = read(account(calls=[library, helper])).phases[Phase.ACCOUNT].storage
    assert storage == [
        StorageAccess(SENDER, 7, write=True, transient=False),
        StorageAccess(SENDER, 7, write=True, transient=True),
        StorageAccess(HELPER, 7, write=False, transient=False),
        StorageAccess(HELPER, 7, write=False, transient=True),
    ]


def test_calls_with_value_size_and_whether_code_ran() -> None:
    calls = [
        frame("CALL", SENDER, HELPER, value="0x5", input="0x" + "ab" * 36, usedOpcodes={"0x0": 1}),
        frame("CALL", SENDER, NO_CODE),  # no code: no work, size 0
        frame("STATICCALL", SENDER, LIB),  # code, halted on its first PUSH: size > 0
        frame("CALL", SENDER, FACTORY, value="0x1", error="insufficient balance for transfer"),
        frame("STATICCALL", SENDER, "0x" + "00" * 19 + "0b"),  # a precompile outside the set
    ]
    seen = sizes(**{NO_CODE: (0, 0xF1), LIB: (120, 0xFA), FACTORY: (90, 0xF1)})
    answer = account(calls=calls, contractSize=seen)
    assert read(answer).phases[Phase.ACCOUNT].calls == [
        CallAccess("CALL", SENDER, HELPER, 5, 36, entered=True),
        CallAccess("CALL", SENDER, NO_CODE, 0, 0, entered=False),
        CallAccess("STATICCALL", SENDER, LIB, 0, 0, entered=True),
        CallAccess("CALL", SENDER, FACTORY, 1, 0, entered=False),
        CallAccess("STATICCALL", SENDER, checksum("0x" + "00" * 19 + "0b"), 0, 0, entered=False),
    ]
    assert verdicts(answer) == {
        ("OP-061", Phase.ACCOUNT),
        ("OP-041", Phase.ACCOUNT),
        ("OP-062", Phase.ACCOUNT),
    }


def test_the_prefund_paid_to_the_entry_point_is_allowed_and_other_calls_to_it_are_not() -> None:
    prefund = frame("CALL", SENDER, EP, value="0x64", usedOpcodes={"0x55": 1}, writes={SLOT: 1})
    assert verdicts(account(calls=[prefund])) == set()
    get_nonce = frame("STATICCALL", SENDER, EP, input="0x" + "00" * 56, usedOpcodes={"0xf3": 1})
    assert verdicts(account(calls=[get_nonce])) == {("OP-054", Phase.ACCOUNT)}


def test_code_accesses_with_the_size_the_tracer_saw() -> None:
    # EXTCODEHASH of the EntryPoint (listed), EXTCODESIZE + ISZERO of it (not listed), and
    # EXTCODESIZE of an address without code.
    answer = account(
        extCodeAccessInfo=[EP.lower(), NO_CODE.lower()],
        contractSize=sizes(**{EP: (900, 0x3F), NO_CODE: (0, 0x3B), HELPER: (50, 0x3B)}),
    )
    accesses = read(answer).phases[Phase.ACCOUNT].code_accesses
    assert accesses == [
        CodeAccess("EXTCODEHASH", SENDER, EP, None, None),
        CodeAccess("EXTCODESIZE", SENDER, NO_CODE, None, 0),
        CodeAccess("EXTCODESIZE", SENDER, HELPER, "ISZERO", 50),
    ]
    assert verdicts(answer) == {("OP-054", Phase.ACCOUNT), ("OP-041", Phase.ACCOUNT)}
    size_check = account(contractSize=sizes(**{EP: (900, 0x3B)}))  # OP-051: not listed
    assert verdicts(size_check) == set()
    no_code_hash = account(extCodeAccessInfo=[NO_CODE], contractSize=sizes(**{NO_CODE: (0, 0x3F)}))
    assert read(no_code_hash).phases[Phase.ACCOUNT].code_accesses[0].result == 0


def test_create2_results_and_a_failed_constructors_storage() -> None:
    account_address = checksum("0x" + "66" * 20)
    made = frame("CREATE2", FACTORY, account_address, usedOpcodes={"0xf3": 1}, writes={SLOT: 1})
    failed = frame(
        "CREATE2", FACTORY, None, usedOpcodes={"0x56": 40}, writes={SLOT: 1},
        error="out of gas", outOfGas=True,
    )  # fmt: skip
    factory = frame("CALL", CREATOR, FACTORY, made, failed, usedOpcodes={"0xf5": 2})
    answer = root(frame("CALL", EP, CREATOR, factory, usedOpcodes={"0xf1": 1}))
    trace = read(answer).phases[Phase.FACTORY]
    assert trace.created == [account_address]
    assert trace.out_of_gas == ["(create)"]
    assert [s.address for s in trace.storage] == [account_address, ZERO]
    assert [u.opcode for u in trace.opcodes] == ["CREATE2", "CREATE2"]


def test_frames_that_ended_abnormally_and_reverts_that_did_not() -> None:
    calls = [
        frame("CALL", SENDER, HELPER, usedOpcodes={"0x56": 9}, error="out of gas", outOfGas=True),
        frame("CALL", SENDER, LIB, usedOpcodes={"0xfd": 1}, error="execution reverted"),
        frame("CALL", SENDER, FACTORY, usedOpcodes={"0xfe": 1}, error="invalid opcode: INVALID"),
    ]
    trace = read(account(calls=calls)).phases[Phase.ACCOUNT]
    assert trace.out_of_gas == [HELPER, FACTORY]
    halted = root(frame("CALL", EP, SENDER, usedOpcodes={"0x5b": 3}, error="out of gas"))
    assert read(halted).phases[Phase.ACCOUNT].out_of_gas == [SENDER]
    assert ("OP-020", Phase.ACCOUNT) in verdicts(halted)


def test_keccak_inputs_come_from_the_outer_frame() -> None:
    preimage = "0x" + "00" * 12 + SENDER[2:].lower() + "00" * 32
    answer = account()
    assert read(answer).keccak_preimages == []  # collected, and there were none
    answer["keccak"] = ["0x", preimage]
    assert read(answer).keccak_preimages == [b"", bytes.fromhex(preimage[2:])]


def test_associated_storage_is_judged_with_the_tracers_preimages() -> None:
    preimage = bytes(12) + bytes.fromhex(SENDER[2:]) + bytes(32)
    slot = "0x" + (int.from_bytes(keccak(preimage), "big") + 1).to_bytes(32, "big").hex()
    touch = frame("CALL", SENDER, HELPER, usedOpcodes={"0x55": 1}, writes={slot: 1})
    answer = account(calls=[touch])
    assert verdicts(answer) == {("STO-021", Phase.ACCOUNT)}  # no preimage: unassociated
    answer["keccak"] = ["0x" + preimage.hex()]
    assert verdicts(answer) == set()
