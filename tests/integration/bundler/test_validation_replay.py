"""The replayed validation (EntrywaySimulations.traceValidation) shows the ERC-7562 rules the
same facts as a trace of the whole `simulateValidation`: per phase, the same opcodes, storage
accesses, calls, code accesses, creations and abnormal frame ends. On real anvil, for clean
and rule-breaking accounts, paymasters and factories, staked and not."""

from __future__ import annotations

from typing import Any

import pytest

from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.validation.simulation import Validator
from entryway.bundler.validation.trace import ValidationTrace, parse_struct_logs
from entryway.bundler.validation.validation_calls import validation_calls
from entryway.domain.userop import UserOperation, user_op_hash
from tests.integration.bundler.rules_setup import RuleContracts, deploy_rule_contracts
from tests.integration.harness import Harness

ACCOUNT_RULES = [
    "", "OWN_STORAGE", "WRITE_SENDER", "READ_OTHER", "WRITE_OTHER", "TIMESTAMP", "GAS",
    "BALANCE", "SELFBALANCE", "CALL_VALUE", "CALL_NO_CODE", "EXTCODESIZE_NO_CODE", "EP_CALL",
    "EP_EXTCODEHASH", "PRECOMPILE", "OOG", "CREATE",
]  # fmt: skip
PAYMASTER_RULES = ["", "OWN_STORAGE", "WRITE_SELF", "READ_OTHER", "WRITE_SENDER", "OOG", "GAS"]
FACTORY_RULES = ["", "OWN_STORAGE", "WRITE_SENDER", "NUMBER", "CREATE", "PRECOMPILE"]


@pytest.fixture(scope="module")
async def rules(harness: Harness) -> RuleContracts:
    return await deploy_rule_contracts(harness)


def _facts(trace: ValidationTrace, entry_point: str) -> dict[str, Any]:
    """What the rules read. The EntryPoint's own code differs between the two simulations
    (and from the chain's), so what EXTCODEHASH or EXTCODESIZE of it returned is left out:
    only OP-051's size check is allowed there, and it holds for both."""

    def result(c: Any) -> int | None:
        return None if c.target == entry_point else c.result

    return {
        phase.value: (
            [(u.opcode, u.frame_address, u.next_opcode) for u in t.opcodes],
            [(s.address, s.slot, s.write, s.transient) for s in t.storage],
            [(c.opcode, c.caller, c.target, c.value, c.args_size, c.entered) for c in t.calls],
            [(c.opcode, c.caller, c.target, c.next_opcode, result(c)) for c in t.code_accesses],
            t.created,
            t.out_of_gas,
        )
        for phase, t in trace.phases.items()
    }


async def _both(validator: Validator, op: UserOperation) -> tuple[ValidationTrace, ...]:
    simulator = validator.simulator
    full = await simulator.trace_validation(op)
    assert not full.get("failed"), "the comparison needs an op whose simulation passes"
    op_hash = user_op_hash(op, simulator.entry_point, validator.chain_id)
    calls = validation_calls(op, op_hash, validator.sender_creator)
    replayed = await simulator.trace_replay(calls)
    assert not replayed.get("failed")
    # The EntryPoint's own work is left out.
    assert len(replayed["structLogs"]) < len(full["structLogs"])
    where = {
        "entry_point": simulator.entry_point,
        "sender_creator": validator.sender_creator,
        "sender": op.sender,
        "paymaster": op.paymaster,
    }
    return (
        parse_struct_logs(full["structLogs"], **where),
        parse_struct_logs(replayed["structLogs"], **where),
    )


async def _assert_same_facts(bundler_rpc: BundlerRpc, op: UserOperation) -> None:
    full, replayed = await _both(bundler_rpc.bundler.validator, op)
    assert full.phases, "nothing traced"
    entry_point = bundler_rpc.bundler.config.entry_point
    assert _facts(replayed, entry_point) == _facts(full, entry_point)


@pytest.mark.parametrize("nested", [False, True], ids=["direct", "nested"])
@pytest.mark.parametrize("rule", ACCOUNT_RULES)
async def test_account_phase_matches(
    bundler_rpc: BundlerRpc, rules: RuleContracts, rule: str, nested: bool
) -> None:
    await _assert_same_facts(
        bundler_rpc, await rules.account_op(f"NESTED:{rule}" if nested and rule else rule)
    )


@pytest.mark.parametrize("staked", [False, True], ids=["unstaked", "staked"])
@pytest.mark.parametrize(
    ("entity", "rule"),
    [*(("paymaster", r) for r in PAYMASTER_RULES), *(("factory", r) for r in FACTORY_RULES)],
)
async def test_paymaster_and_factory_phases_match(
    bundler_rpc: BundlerRpc, rules: RuleContracts, entity: str, rule: str, staked: bool
) -> None:
    make = rules.paymaster_op if entity == "paymaster" else rules.factory_op
    await _assert_same_facts(bundler_rpc, await make(rule, staked=staked))


async def test_an_underfunded_account_pays_its_missing_funds_in_the_replay(
    bundler_rpc: BundlerRpc, rules: RuleContracts, harness: Harness
) -> None:
    """missingAccountFunds comes from the deposit, as the EntryPoint computes it: an account
    with no deposit pays its prefund back to the EntryPoint, one with enough deposit pays
    nothing; the replay's calls show the same payment as the full trace."""
    op = await rules.account_op("")
    full, replayed = await _both(bundler_rpc.bundler.validator, op)
    entry_point = bundler_rpc.bundler.config.entry_point
    paid = [c.value for c in replayed.phases[next(iter(replayed.phases))].calls if c.value]
    assert paid == [op.required_prefund]
    assert _facts(replayed, entry_point) == _facts(full, entry_point)
    await harness.executor.send(
        entry_point,
        bytes.fromhex("b760faf9") + bytes(12) + bytes.fromhex(op.sender[2:]),  # depositTo
        value=op.required_prefund * 2,
    )
    full, replayed = await _both(bundler_rpc.bundler.validator, op)
    assert not [c for c in replayed.phases[next(iter(replayed.phases))].calls if c.value]
    assert _facts(replayed, entry_point) == _facts(full, entry_point)
