"""Validation facts from callTracer and prestateTracer answers (geth's format, written by
hand), and what the ERC-7562 rules then find in them."""

from __future__ import annotations

from typing import Any

from entryway.bundler.validation.call_trace import (
    CALLS_MODE_RULES,
    CALLS_MODE_UNCHECKED,
    calls_trace,
    code_hashes,
)
from entryway.bundler.validation.rules import Entities, RuleSettings, StakeInfo, check
from entryway.bundler.validation.trace import Phase, ValidationTrace
from entryway.domain.evm import keccak

EP = "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108"
CREATOR = "0x449ED7C3e6Fee6a97311d4b55475DF59C44AdD33"
SENDER = "0x1111111111111111111111111111111111111111"
STORE = "0x2222222222222222222222222222222222222222"
LIB = "0x3333333333333333333333333333333333333333"
PAYMASTER = "0x4444444444444444444444444444444444444444"
FACTORY = "0x5555555555555555555555555555555555555555"
NO_CODE = "0x000000000000000000000000000000000000dEaD"
CODE = "0x6080604052"
UNSTAKED = StakeInfo(0, 0)
STAKED = StakeInfo(10**18, 86_400)
SETTINGS = RuleSettings(min_stake_wei=10**18)


def frame(kind: str, to: str | None, *calls: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """One callTracer frame as geth writes it (lower-case addresses, hex quantities); `from`
    is filled in by `tree`."""
    out: dict[str, Any] = {"type": kind, "input": fields.pop("input", "0x"), "gas": "0x1"}
    if to is not None:
        out["to"] = to.lower()
    if calls:
        out["calls"] = list(calls)
    if "value" in fields:
        out["value"] = hex(fields.pop("value"))
    return out | fields


def tree(*calls: dict[str, Any]) -> dict[str, Any]:
    """The top frame (the replay at the EntryPoint), `from` set on every frame."""
    top = frame("CALL", EP, *calls, value=0)

    def fill(parent: dict[str, Any], owner: str) -> None:
        for child in parent.get("calls", ()):
            child["from"] = owner.lower()
            shared = child["type"] in ("DELEGATECALL", "CALLCODE")
            fill(child, owner if shared else child.get("to", "0x" + "00" * 20))

    fill(top, EP)
    return top


def account(code: str = CODE, **slots: int) -> dict[str, Any]:
    """A prestate entry; `slots` as s<number>=value."""
    out: dict[str, Any] = {"balance": "0x0", "nonce": 1}
    if code != "0x":
        out["code"] = code
    if slots:
        out["storage"] = {_word(int(k[1:])): _word(v) for k, v in slots.items()}
    return out


def _word(value: int) -> str:
    return "0x" + value.to_bytes(32, "big").hex()


def state(**accounts: dict[str, Any]) -> dict[str, Any]:
    names = {"EP": EP, "SENDER": SENDER, "STORE": STORE, "LIB": LIB, "PAYMASTER": PAYMASTER}
    names |= {"FACTORY": FACTORY, "CREATOR": CREATOR}
    return {names[k].lower(): v for k, v in accounts.items()}


def traced(
    top: dict[str, Any],
    prestate: dict[str, Any],
    diff: dict[str, Any] | None = None,
    paymaster: str | None = None,
) -> ValidationTrace:
    return calls_trace(
        top,
        prestate,
        diff or {"pre": {}, "post": {}},
        entry_point=EP,
        sender_creator=CREATOR,
        sender=SENDER,
        paymaster=paymaster,
    )


def rules_found(
    trace: ValidationTrace,
    *,
    factory: str | None = None,
    paymaster: str | None = None,
    staked: bool = False,
) -> list[tuple[str, Phase]]:
    stake = STAKED if staked else UNSTAKED
    who = Entities(EP, SENDER, factory, paymaster, UNSTAKED, stake, stake)
    return [(v.rule, v.phase) for v in check(trace, who, SETTINGS)]


BASE = {"EP": account(), "SENDER": account()}


def test_calls_of_the_account_phase_with_value_code_and_precompiles() -> None:
    top = tree(
        frame(
            "CALL",
            SENDER,
            frame("CALL", STORE, value=1),  # value to a non-EntryPoint
            frame("CALL", NO_CODE, value=0),  # no code
            frame("STATICCALL", "0x0000000000000000000000000000000000000001"),  # ecrecover
            frame("STATICCALL", "0x000000000000000000000000000000000000000b"),  # not allowed
            frame("DELEGATECALL", LIB, value=5),  # geth shows the caller's value here
            frame("CALL", EP, value=7),  # the prefund, to the EntryPoint's fallback
            value=0,
        )
    )
    trace = traced(top, state(**BASE, STORE=account(), LIB=account()))
    account_phase = trace.phases[Phase.ACCOUNT]
    assert list(trace.phases) == [Phase.ACCOUNT]
    assert [(c.opcode, c.caller, c.target, c.value, c.entered) for c in account_phase.calls] == [
        ("CALL", SENDER, STORE, 1, True),
        ("CALL", SENDER, NO_CODE, 0, False),
        ("STATICCALL", SENDER, "0x0000000000000000000000000000000000000001", 0, False),
        ("STATICCALL", SENDER, "0x000000000000000000000000000000000000000b", 0, False),
        ("DELEGATECALL", SENDER, LIB, 0, True),
        ("CALL", SENDER, EP, 7, True),
    ]
    assert rules_found(trace) == [
        ("OP-061", Phase.ACCOUNT),
        ("OP-041", Phase.ACCOUNT),
        ("OP-062", Phase.ACCOUNT),
    ]


def test_entry_point_calls_other_than_deposit_to_or_the_fallback_are_refused() -> None:
    deposit_to = "0xb760faf9" + "00" * 32
    allowed = tree(frame("CALL", SENDER, frame("CALL", EP, input=deposit_to, value=3)))
    assert rules_found(traced(allowed, state(**BASE))) == []
    get_nonce = "0x35567e1a" + "00" * 64
    refused = tree(frame("CALL", SENDER, frame("STATICCALL", EP, input=get_nonce)))
    assert rules_found(traced(refused, state(**BASE))) == [("OP-054", Phase.ACCOUNT)]


def test_phases_are_the_entry_points_direct_calls_and_its_self_call_is_ignored() -> None:
    top = tree(
        frame("CALL", CREATOR, frame("CALL", FACTORY, frame("CREATE2", SENDER))),
        frame("CALL", EP, frame("CALL", STORE, value=1)),  # validateSenderAndPaymaster
        frame("CALL", SENDER),
        frame("CALL", PAYMASTER, frame("SELFDESTRUCT", STORE, value=0)),
    )
    prestate = state(EP=account(), CREATOR=account(), FACTORY=account(), PAYMASTER=account())
    trace = traced(top, prestate, paymaster=PAYMASTER)
    assert list(trace.phases) == [Phase.FACTORY, Phase.ACCOUNT, Phase.PAYMASTER]
    assert trace.phases[Phase.FACTORY].created == [SENDER]
    assert trace.phases[Phase.ACCOUNT].calls == []  # the self-call's frames are no phase's
    found = rules_found(trace, factory=FACTORY, paymaster=PAYMASTER)
    assert found == [("OP-011", Phase.PAYMASTER)]  # SELFDESTRUCT, seen as its frame


def test_create_and_create2_frames_are_opcode_uses_and_created_addresses() -> None:
    other = "0x6666666666666666666666666666666666666666"
    top = tree(
        frame(
            "CALL",
            CREATOR,
            frame(
                "CALL",
                FACTORY,
                frame("CREATE", None, error="execution reverted"),  # failed: no `to`
                frame("CREATE2", other),
                frame("CREATE2", other, error="out of gas"),  # a node that keeps `to`
                frame("CREATE2", SENDER),
            ),
        ),
        frame("CALL", SENDER, frame("CALL", other)),  # code created above: entered
    )
    trace = traced(top, state(EP=account(), CREATOR=account(), FACTORY=account()))
    factory_phase = trace.phases[Phase.FACTORY]
    assert [(u.opcode, u.frame_address) for u in factory_phase.opcodes] == [
        ("CREATE", FACTORY),
        ("CREATE2", FACTORY),
        ("CREATE2", FACTORY),
        ("CREATE2", FACTORY),
    ]
    assert factory_phase.created == [other, SENDER]
    assert factory_phase.out_of_gas == [other]
    assert trace.phases[Phase.ACCOUNT].calls[0].entered
    assert rules_found(trace, factory=FACTORY) == [
        ("OP-011", Phase.FACTORY),  # CREATE, unstaked
        ("OP-031", Phase.FACTORY),  # CREATE2 more than once
        ("OP-020", Phase.FACTORY),
    ]
    # Staked, the factory may CREATE (OP-033) and CREATE2 more (EREP-060).
    assert rules_found(trace, factory=FACTORY, staked=True) == [("OP-020", Phase.FACTORY)]


def test_frames_cut_short_are_out_of_gas_and_invalid_opcodes_are_named() -> None:
    top = tree(
        frame(
            "CALL",
            SENDER,
            frame("STATICCALL", SENDER, error="out of gas"),
            frame("CALL", STORE, error="execution reverted"),
            frame("CALL", STORE, error="insufficient balance for transfer", value=1),
            frame("CREATE2", None, error="CreateCollision"),  # anvil's name; nothing ran
            frame("STATICCALL", "0x0000000000000000000000000000000000000005", error="out of gas"),
        )
    )
    trace = traced(top, state(**BASE, STORE=account()))
    assert trace.phases[Phase.ACCOUNT].out_of_gas == [SENDER]
    assert ("OP-020", Phase.ACCOUNT) in rules_found(trace)

    for error, rule in [
        ("invalid opcode: INVALID", "OP-011"),  # geth and anvil
        ("invalid opcode: opcode 0xc not defined", "OP-013"),  # geth
        ("invalid opcode", "OP-013"),  # anvil
    ]:
        top = tree(frame("CALL", SENDER, frame("CALL", STORE, error=error)))
        found = rules_found(traced(top, state(**BASE, STORE=account())))
        assert found == [(rule, Phase.ACCOUNT), ("OP-020", Phase.ACCOUNT)], error


def test_storage_by_owner_phase_and_write() -> None:
    """Reads from the prestate, writes from the diff; a DELEGATECALL's slots are its caller's,
    so the library called by the account is no storage owner there."""
    top = tree(
        frame("CALL", SENDER, frame("DELEGATECALL", LIB), frame("STATICCALL", STORE)),
        frame("CALL", PAYMASTER, frame("CALL", LIB)),
    )
    prestate = state(
        **BASE,
        PAYMASTER=account(),
        STORE=account(s0=1, s1=5),
        LIB=account(s7=0),
    )
    diff = {
        "pre": {STORE.lower(): {"storage": {_word(1): _word(5)}}},
        "post": {
            STORE.lower(): {"storage": {_word(1): _word(6)}},
            LIB.lower(): {"storage": {_word(7): _word(9)}},
        },
    }
    trace = traced(top, prestate, diff, paymaster=PAYMASTER)
    assert [(s.address, s.slot, s.write) for s in trace.phases[Phase.ACCOUNT].storage] == [
        (STORE, 0, False),
        (STORE, 1, True),
    ]
    assert [(s.address, s.slot, s.write) for s in trace.phases[Phase.PAYMASTER].storage] == [
        (LIB, 7, True)
    ]


def test_a_contract_used_in_two_phases_has_its_slots_judged_in_both() -> None:
    """Conservative: the paymaster's own read is also judged as the account's."""
    top = tree(
        frame("CALL", SENDER, frame("STATICCALL", STORE)),
        frame("CALL", PAYMASTER, frame("STATICCALL", STORE)),
    )
    trace = traced(
        top, state(**BASE, PAYMASTER=account(), STORE=account(s3=1)), paymaster=PAYMASTER
    )
    # A staked paymaster may read any non-entity slot (STO-033); the account may not.
    found = rules_found(trace, paymaster=PAYMASTER, staked=True)
    assert found == [("STO-021", Phase.ACCOUNT)]


def mapping_slot(key: str, index: int) -> int:
    return int.from_bytes(
        keccak(bytes(12) + bytes.fromhex(key[2:]) + index.to_bytes(32, "big")), "big"
    )


def paymaster_writes(slot: int, store_code: str = CODE) -> ValidationTrace:
    top = tree(frame("CALL", SENDER), frame("CALL", PAYMASTER, frame("CALL", STORE)))
    prestate = state(**BASE, PAYMASTER=account(), STORE=account(store_code, **{f"s{slot}": 0}))
    diff = {"pre": {}, "post": {STORE.lower(): {"storage": {_word(slot): _word(1)}}}}
    return traced(top, prestate, diff, paymaster=PAYMASTER)


def test_association_is_proved_for_mappings_at_small_slots_with_struct_fields() -> None:
    """An unstaked paymaster may write the sender's entry in a mapping (STO-021)."""
    for index, field in [(0, 0), (1, 0), (127, 0), (5, 128)]:
        trace = paymaster_writes(mapping_slot(SENDER, index) + field)
        assert rules_found(trace, paymaster=PAYMASTER) == [], (index, field)
        assert trace.keccak_preimages == [
            bytes(12) + bytes.fromhex(SENDER[2:]) + index.to_bytes(32, "big")
        ]
    for slot in (mapping_slot(SENDER, 128), mapping_slot(SENDER, 1) + 129, 12345):
        found = rules_found(paymaster_writes(slot), paymaster=PAYMASTER)
        assert found == [("STO-021", Phase.PAYMASTER)], slot


def test_association_is_proved_for_an_erc7201_namespace_in_the_owners_code() -> None:
    root = int.from_bytes(keccak(b"a namespace"), "big") & ~0xFF
    code = "0x6080" + "7f" + root.to_bytes(32, "big").hex() + "5460"  # PUSH32 root; SLOAD
    for field in (0, 3):
        slot = mapping_slot(SENDER, root + field)
        assert rules_found(paymaster_writes(slot, code), paymaster=PAYMASTER) == []
        # Without the root in the code that ran there, nothing proves it.
        found = rules_found(paymaster_writes(slot), paymaster=PAYMASTER)
        assert found == [("STO-021", Phase.PAYMASTER)]


def test_a_staked_factorys_associated_slots_are_proved() -> None:
    """STO-032: the factory is not named to the walk; it is the SenderCreator's callee."""
    slot = mapping_slot(FACTORY, 1)
    top = tree(frame("CALL", CREATOR, frame("CALL", FACTORY, frame("CALL", STORE))))
    prestate = state(EP=account(), CREATOR=account(), FACTORY=account(), STORE=account())
    diff = {"pre": {}, "post": {STORE.lower(): {"storage": {_word(slot): _word(1)}}}}
    trace = traced(top, prestate, diff)
    assert rules_found(trace, factory=FACTORY, staked=True) == []
    assert rules_found(trace, factory=FACTORY) == [("STO-021", Phase.FACTORY)]


def test_a_nested_mapping_is_not_proved_associated() -> None:
    outer = mapping_slot(SENDER, 2).to_bytes(32, "big")
    slot = int.from_bytes(keccak(bytes(12) + bytes.fromhex(STORE[2:]) + outer), "big")
    assert rules_found(paymaster_writes(slot), paymaster=PAYMASTER) == [
        ("STO-021", Phase.PAYMASTER)
    ]


def test_an_entity_without_code_has_no_phase() -> None:
    """As in the struct logger's walk: a phase is a frame of code the EntryPoint entered."""
    top = tree(frame("CALL", SENDER, frame("CALL", STORE, value=1)))
    assert traced(top, state(EP=account(), STORE=account())).phases == {}


def test_no_guess_is_hashed_without_storage_to_associate() -> None:
    top = tree(frame("CALL", SENDER, frame("CALL", EP, value=1)))
    prestate = state(EP=account(s9=0), SENDER=account(s0=1))
    assert traced(top, prestate).keccak_preimages == []


def test_code_hashes_of_every_listed_account() -> None:
    prestate = state(EP=account(), STORE=account("0x"))
    assert code_hashes(prestate) == {EP: keccak(bytes.fromhex(CODE[2:])), STORE: keccak(b"")}


def test_anvil_and_geth_prestates_give_the_same_facts() -> None:
    """anvil lists accounts empty before the run (a call target without code, a contract
    the run creates); geth leaves them out and shows the created one in the diff only."""
    top = tree(
        frame("CALL", CREATOR, frame("CALL", FACTORY, frame("CREATE2", SENDER))),
        frame("CALL", SENDER, frame("CALL", NO_CODE)),
    )
    geth = state(EP=account(), CREATOR=account(), FACTORY=account())
    anvil = geth | {NO_CODE.lower(): {"balance": "0x0"}, SENDER.lower(): {"balance": "0x5"}}
    diff = {"pre": {}, "post": {SENDER.lower(): {"code": CODE, "nonce": 1}}}
    assert traced(top, geth, diff) == traced(top, anvil, diff)


def test_the_rule_lists_name_erc7562_rules_and_every_unchecked_part_of_an_enforced_rule() -> None:
    for rule, note in CALLS_MODE_RULES.items():
        assert rule.split("-")[0] in ("OP", "STO", "COD", "EREP")
        if note.startswith("partly"):
            assert rule in CALLS_MODE_UNCHECKED, rule
    assert {"OP-012", "OP-070", "OP-080"} <= CALLS_MODE_UNCHECKED.keys() - CALLS_MODE_RULES.keys()
