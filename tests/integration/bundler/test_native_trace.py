"""geth's `erc7562Tracer` format judges as the struct logger does: the same op traced both
ways on real anvil (the native format emitted by tests/node_kinds/erc7562_tracer.js), both
traces read and checked by the ERC-7562 rules, the same rules broken in the same phases.
For accounts, paymasters and factories, each breaking rules directly and one call deeper,
staked and not; and clean ops, which both pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.validation.native_trace import parse_native_trace
from entryway.bundler.validation.rules import check
from entryway.bundler.validation.simulation import Validator
from entryway.bundler.validation.trace import (
    CALLS,
    KECCAK_COLLECTOR,
    ValidationTrace,
    parse_struct_logs,
)
from entryway.bundler.validation.validation_calls import validation_calls
from entryway.domain.evm import hex_to_bytes
from entryway.domain.userop import UserOperation, user_op_hash
from tests.integration.bundler.rules_setup import RuleContracts, deploy_rule_contracts
from tests.integration.bundler.test_erc7562 import BROKEN
from tests.integration.harness import ETHER, Harness

TRACER = (Path(__file__).parents[2] / "node_kinds" / "erc7562_tracer.js").read_text()
ACCOUNT_RULES = sorted({*BROKEN, "OWN_STORAGE", "WRITE_SENDER", "READ_OTHER", "CREATE2"})
PAYMASTER_RULES = ["OWN_STORAGE", "WRITE_SELF", "READ_OTHER", "WRITE_SENDER", "SELFBALANCE"]
PAYMASTER_RULES += ["TIMESTAMP", "GAS", "CALL_NO_CODE", "EP_CALL", "OOG", "WRITE_OTHER"]
FACTORY_RULES = ["OWN_STORAGE", "WRITE_SENDER", "NUMBER", "BALANCE", "CREATE", "CREATE2"]
FACTORY_RULES += ["EXTCODESIZE_NO_CODE", "PRECOMPILE"]


@pytest.fixture(scope="module")
async def rules(harness: Harness) -> RuleContracts:
    return await deploy_rule_contracts(harness)


async def _traces(validator: Validator, op: UserOperation) -> tuple[ValidationTrace, ...]:
    """The op's validation replay traced by the struct logger and by the native format."""
    simulator = validator.simulator
    op_hash = user_op_hash(op, simulator.entry_point, validator.chain_id)
    calls = validation_calls(op, op_hash, validator.sender_creator)
    steps = await simulator.trace_replay(calls)
    preimages = await simulator.trace_replay(calls, tracer=KECCAK_COLLECTOR)
    native = await simulator.trace_replay(calls, tracer=TRACER)
    where = {
        "entry_point": simulator.entry_point,
        "sender_creator": validator.sender_creator,
        "sender": op.sender,
        "paymaster": op.paymaster,
    }
    opcodes = parse_struct_logs(steps["structLogs"], **where)
    opcodes.keccak_preimages = [hex_to_bytes(p) for p in preimages]
    return opcodes, parse_native_trace(native, **where)


def _facts(trace: ValidationTrace, entry_point: str) -> dict[str, Any]:
    """What both formats state alike: the opcodes a rule looks at (a GAS right before a call
    is no use of GAS), which slots of whom were read or written, the calls, who inspected
    whose code (and, but at the EntryPoint whose code simulation replaces, whether it had
    any), the CREATE2 results and the frames that ended abnormally."""
    facts = {}
    for phase, t in trace.phases.items():
        written = {(s.address, s.slot, s.transient) for s in t.storage if s.write}
        facts[phase.value] = (
            sorted(
                {
                    (u.opcode, u.frame_address)
                    for u in t.opcodes
                    if not (u.opcode == "GAS" and u.next_opcode in CALLS)
                }
            ),
            sorted(
                {(s.address, s.slot, s.transient, s.write) for s in t.storage}
                - {(a, slot, tr, False) for a, slot, tr in written}
            ),
            sorted(
                {(c.opcode, c.caller, c.target, c.value, c.args_size, c.entered) for c in t.calls}
            ),
            sorted(
                {
                    (c.caller, c.target, None if c.target == entry_point else c.result == 0)
                    for c in t.code_accesses
                    if not (c.opcode == "EXTCODESIZE" and c.next_opcode == "ISZERO")
                }
            ),
            t.created,
            sorted(set(t.out_of_gas)),
        )
    return facts


async def _assert_judged_alike(
    bundler_rpc: BundlerRpc, op: UserOperation, rule: str, expected: str | None
) -> None:
    """Both traces break the same rules in the same phases; none for a clean op (`rule`
    empty), and `expected` among them where given."""
    validator = bundler_rpc.bundler.validator
    outcome = await validator.validate(op, now=0, trace=False, check=False)
    who = outcome.entities(validator.simulator.entry_point, op)
    opcodes, native = await _traces(validator, op)
    assert opcodes.phases, "nothing traced"
    context = outcome.paymaster_context
    by_opcodes = {(v.rule, v.phase) for v in check(opcodes, who, validator.settings, context)}
    by_native = {(v.rule, v.phase) for v in check(native, who, validator.settings, context)}
    assert by_native == by_opcodes
    if not rule:
        assert by_opcodes == set()
    if expected is not None:
        assert expected in {found for found, _ in by_opcodes}
    entry_point = validator.simulator.entry_point
    assert _facts(native, entry_point) == _facts(opcodes, entry_point)


def _cases(rules: list[str]) -> list[str]:
    return ["", *rules, *(f"NESTED:{r}" for r in rules)]


def _expected(rule: str, staked: bool) -> str | None:
    """The rule the opcodes path must find, where the test can tell it regardless of stake."""
    name = rule.removeprefix("NESTED:")
    return BROKEN[name][0] if name in BROKEN and not staked else None


@pytest.mark.parametrize("rule", _cases(ACCOUNT_RULES))
async def test_account_rules_judged_alike(
    bundler_rpc: BundlerRpc, rules: RuleContracts, rule: str
) -> None:
    op = await rules.account_op(rule)
    await _assert_judged_alike(bundler_rpc, op, rule, _expected(rule, False))


@pytest.mark.parametrize("staked", [False, True], ids=["unstaked", "staked"])
@pytest.mark.parametrize("rule", _cases(PAYMASTER_RULES))
async def test_paymaster_rules_judged_alike(
    bundler_rpc: BundlerRpc, rules: RuleContracts, rule: str, staked: bool
) -> None:
    op = await rules.paymaster_op(rule, staked=staked)
    await _assert_judged_alike(bundler_rpc, op, rule, _expected(rule, staked))


@pytest.mark.parametrize("staked", [False, True], ids=["unstaked", "staked"])
@pytest.mark.parametrize("rule", _cases(FACTORY_RULES))
async def test_factory_rules_judged_alike(
    bundler_rpc: BundlerRpc, rules: RuleContracts, rule: str, staked: bool
) -> None:
    op = await rules.factory_op(rule, staked=staked)
    await _assert_judged_alike(bundler_rpc, op, rule, _expected(rule, staked))


async def test_a_sponsored_smart_account_deployment_passes_both(
    bundler_rpc: BundlerRpc, harness: Harness
) -> None:
    owner = harness.new_key()
    op = await harness.build_op(owner.address, b"")
    await harness.fund(op.sender, ETHER)
    op = harness.sign(harness.sponsor(op), owner)
    await _assert_judged_alike(bundler_rpc, op, "", None)
