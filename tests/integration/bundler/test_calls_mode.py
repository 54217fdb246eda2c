"""Calls mode against the struct logger, on real anvil: the replay of each rule-breaking op of
the ERC-7562 suite traced both ways (the struct logger's steps; callTracer, prestateTracer
and prestateTracer in diffMode, in one batch) and judged by the same rules.

A case whose rule calls mode enforces (`CALLS_MODE_RULES`, and not in the part
`CALLS_MODE_UNCHECKED` names) must be refused for that rule in the same phase; any case may
find no (rule, phase) the struct logger does not find; clean ops pass both. A test id ends
with the rule and `enforced` or `unchecked` (or with `clean`), so the coverage table reads
off the test report."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from entryway.bundler.releases import sender_creator_of
from entryway.bundler.validation.call_trace import (
    CALLS_MODE_RULES,
    CALLS_MODE_UNCHECKED,
    calls_trace,
    code_hashes,
)
from entryway.bundler.validation.rules import (
    Entities,
    PreimagesNeeded,
    RuleSettings,
    StakeInfo,
    check,
)
from entryway.bundler.validation.simulation import SIMULATION_GAS_CAP, Simulator
from entryway.bundler.validation.trace import (
    KECCAK_COLLECTOR,
    Phase,
    ValidationTrace,
    parse_struct_logs,
)
from entryway.bundler.validation.validation_calls import ValidationCalls, validation_calls
from entryway.domain.evm import hex_to_bytes, keccak, to_hex
from entryway.domain.userop import UserOperation, user_op_hash
from tests.integration.bundler.rules_setup import RuleContracts, deploy_rule_contracts
from tests.integration.bundler.test_erc7562 import BROKEN
from tests.integration.harness import Harness

PHASES = {"account": Phase.ACCOUNT, "paymaster": Phase.PAYMASTER, "factory": Phase.FACTORY}
# Cases of a partly enforced rule that fall in the part calls mode sees.
SEEN_PART = {"CREATE", "CALL_NO_CODE", "EP_CALL"}
TRACERS = [("callTracer", {}), ("prestateTracer", {}), ("prestateTracer", {"diffMode": True})]


@dataclass(frozen=True)
class Case:
    entity: str
    rule: str  # what the op's entity does (TestRules.sol)
    expected: str | None  # the rule id the struct logger refuses it for
    staked: bool = False

    @property
    def enforced(self) -> bool:
        rule = self.expected
        if rule is None:
            return True
        seen = rule not in CALLS_MODE_UNCHECKED or self.rule.removeprefix("NESTED:") in SEEN_PART
        return rule in CALLS_MODE_RULES and seen

    @property
    def id(self) -> str:
        staked = "-staked" if self.staked else ""
        if self.expected is None:
            return f"{self.entity}{staked}-{self.rule or 'nothing'}-clean"
        status = "enforced" if self.enforced else "unchecked"
        return f"{self.entity}{staked}-{self.rule}-{self.expected}-{status}"


def _cases() -> Iterator[Case]:
    def both(entity: str, rules: list[str]) -> Iterator[Case]:
        for rule in rules:
            for name in (rule, f"NESTED:{rule}"):
                yield Case(entity, name, BROKEN[rule][0])

    yield from both("account", sorted(BROKEN))
    yield from both("paymaster", ["TIMESTAMP", "GAS", "CALL_NO_CODE", "EP_CALL", "OOG"])
    yield from both("paymaster", ["WRITE_OTHER"])
    yield from both("factory", ["NUMBER", "BALANCE", "EXTCODESIZE_NO_CODE", "PRECOMPILE"])
    yield from both("factory", ["CREATE"])
    yield Case("factory", "CREATE2", "OP-031")
    yield Case("account", "CREATE2", "OP-031")
    for entity, rule, unstaked in [
        ("paymaster", "OWN_STORAGE", "STO-031"),
        ("paymaster", "WRITE_SELF", "STO-021"),  # associated with it, which needs stake
        ("paymaster", "READ_OTHER", "STO-021"),
        ("paymaster", "SELFBALANCE", "OP-080"),
        ("factory", "OWN_STORAGE", "STO-031"),
        ("factory", "WRITE_SENDER", "STO-022"),
    ]:
        yield Case(entity, rule, unstaked)
        yield Case(entity, rule, None, staked=True)
    yield Case("factory", "CREATE", None, staked=True)  # OP-033
    for rule in ["", "OWN_STORAGE", "WRITE_SENDER", "NESTED:WRITE_SENDER"]:
        yield Case("account", rule, None)
    yield Case("account", "READ_OTHER", "STO-021")
    yield Case("paymaster", "WRITE_SENDER", None)
    yield Case("paymaster", "", None)
    yield Case("factory", "", None)


CASES = list(_cases())


@dataclass
class Tracing:
    simulator: Simulator
    sender_creator: str
    settings: RuleSettings


@pytest.fixture(scope="module")
async def rules(harness: Harness) -> RuleContracts:
    return await deploy_rule_contracts(harness)


@pytest.fixture(scope="module")
async def tracing(harness: Harness) -> Tracing:
    simulator = Simulator(harness.eth, harness.deployment.entry_point)
    settings = RuleSettings(min_stake_wei=10**18).for_version(simulator.version)
    creator = await sender_creator_of(harness.eth, simulator.entry_point)
    return Tracing(simulator, creator, settings)


async def _op(rules: RuleContracts, case: Case) -> UserOperation:
    if case.entity == "account":
        return await rules.account_op(case.rule)
    if case.entity == "paymaster":
        return await rules.paymaster_op(case.rule, staked=case.staked)
    return await rules.factory_op(case.rule, staked=case.staked)


async def _entities(t: Tracing, op: UserOperation) -> Entities:
    result = await t.simulator.simulate_validation(op)
    _, sender_info, factory_info, paymaster_info, _ = result[0]
    return Entities(
        entry_point=t.simulator.entry_point,
        sender=op.sender,
        factory=op.factory,
        paymaster=op.paymaster,
        sender_stake=StakeInfo(*sender_info),
        factory_stake=StakeInfo(*factory_info) if op.factory else None,
        paymaster_stake=StakeInfo(*paymaster_info) if op.paymaster else None,
    )


async def _struct_logger(t: Tracing, calls: ValidationCalls, who: Entities) -> set[Any]:
    """The bundler's own path: the replay's steps, the KECCAK256 inputs fetched if asked."""
    replayed = await t.simulator.trace_replay(calls)
    assert not replayed.get("failed")
    trace = parse_struct_logs(replayed["structLogs"], **_where(t, who))
    try:
        return _found(trace, who, t.settings)
    except PreimagesNeeded:
        inputs = await t.simulator.trace_replay(calls, tracer=KECCAK_COLLECTOR)
        trace.keccak_preimages = [hex_to_bytes(p) for p in inputs]
        return _found(trace, who, t.settings)


async def _three_tracers(t: Tracing, calls: ValidationCalls) -> list[Any]:
    """callTracer, prestateTracer and its diffMode on the replay, in one JSON-RPC batch."""
    simulator = t.simulator
    call = {"to": simulator.entry_point, "data": to_hex(calls.calldata())}
    call["gas"] = hex(SIMULATION_GAS_CAP)
    return await simulator.eth.rpc.batch(
        [
            (
                "debug_traceCall",
                [
                    call,
                    simulator.block,
                    {
                        "stateOverrides": simulator.replay_override,
                        "tracer": tracer,
                        "tracerConfig": config,
                    },
                ],
            )
            for tracer, config in TRACERS
        ]
    )


def _where(t: Tracing, who: Entities) -> dict[str, Any]:
    return {
        "entry_point": who.entry_point,
        "sender_creator": t.sender_creator,
        "sender": who.sender,
        "paymaster": who.paymaster,
    }


def _found(trace: ValidationTrace, who: Entities, settings: RuleSettings) -> set[Any]:
    return {(v.rule, v.phase) for v in check(trace, who, settings)}


async def _calls_mode(t: Tracing, calls: ValidationCalls, who: Entities) -> set[Any]:
    top, prestate, diff = await _three_tracers(t, calls)
    assert "error" not in top, top.get("error")
    return _found(calls_trace(top, prestate, diff, **_where(t, who)), who, t.settings)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_calls_mode_finds_what_it_enforces_and_nothing_the_struct_logger_does_not(
    rules: RuleContracts, tracing: Tracing, case: Case
) -> None:
    op = await _op(rules, case)
    who = await _entities(tracing, op)
    op_hash = user_op_hash(op, tracing.simulator.entry_point, rules.h.chain_id)
    calls = validation_calls(op, op_hash, tracing.sender_creator)
    struct_logger = await _struct_logger(tracing, calls, who)
    calls_mode = await _calls_mode(tracing, calls, who)
    expected = {(case.expected, PHASES[case.entity])} if case.expected else set()
    assert expected <= struct_logger, struct_logger
    assert calls_mode <= struct_logger, "calls mode refuses what the struct logger accepts"
    if case.enforced:
        assert expected <= calls_mode, calls_mode
    if case.expected is None:
        assert struct_logger == calls_mode == set()


@pytest.mark.parametrize("entity", ["account", "paymaster", "factory"])
async def test_the_prestate_gives_the_code_hash_of_every_contract_validation_used(
    rules: RuleContracts, tracing: Tracing, harness: Harness, entity: str
) -> None:
    """COD-010 without reading code again: each contract whose code the struct logger saw
    used (entities, entered calls, code reads) is in the prestate with its on-chain hash."""
    op = await _op(rules, Case(entity, "NESTED:WRITE_SENDER", None))
    who = await _entities(tracing, op)
    calls = validation_calls(
        op, user_op_hash(op, who.entry_point, harness.chain_id), tracing.sender_creator
    )
    replayed = await tracing.simulator.trace_replay(calls)
    trace = parse_struct_logs(replayed["structLogs"], **_where(tracing, who))
    used = {a for a in (op.factory, op.paymaster) if a}
    if op.factory is None:
        used.add(op.sender)  # a sender being deployed has no code yet
    for phase in trace.phases.values():
        used |= {c.target for c in phase.calls if c.entered}
        used |= {c.target for c in phase.code_accesses}
    used -= {who.entry_point}
    _, prestate, _ = await _three_tracers(tracing, calls)
    hashes = code_hashes(prestate)
    for address in used:
        assert hashes[address] == keccak(await harness.eth.get_code(address)), address
