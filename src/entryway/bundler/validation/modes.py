"""Validation modes: how much of ERC-7562 a bundler can enforce, by what its node can trace.

The rules judge what an op's validation did (opcodes, storage, calls, code), and only a
trace shows that. Nodes differ in what they trace:

- `native`: `debug_traceCall` with geth's `erc7562Tracer` (geth 1.16+, Erigon): every rule;
- `opcodes`: `debug_traceCall` with the default struct logger (anvil, geth, a node of one's
  own): every rule;
- `calls`: `debug_traceCall` with `callTracer` and `prestateTracer` only (hosted plans):
  calls, value, code, storage by address and slot;
- `untraced`: `eth_call` with state overrides only (public endpoints): the EntryPoint's own
  checks, stake and reputation.

`RULES` says, rule by rule, which modes enforce it; docs/bundler.md prints the same table. A
chain's mode is the strongest its node serves (`probe_modes`), unless the settings pin one:
then a node that cannot serve it stops the chain at start (`choose_mode`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from entryway.bundler.validation.call_trace import CALLS_MODE_RULES, CALLS_MODE_UNCHECKED
from entryway.chain.rpc import JsonRpcClient, RpcError, RpcTransportError
from entryway.errors import ConfigurationError

log = logging.getLogger("entryway.bundler")


class ValidationMode(StrEnum):
    NATIVE = "native"
    OPCODES = "opcodes"
    CALLS = "calls"
    UNTRACED = "untraced"

    @property
    def traced(self) -> bool:
        return self is not ValidationMode.UNTRACED

    @property
    def complete(self) -> bool:
        """Whether every ERC-7562 rule is enforced."""
        return self in (ValidationMode.NATIVE, ValidationMode.OPCODES)

    @property
    def strength(self) -> int:
        return _ORDER.index(self)


_ORDER = (
    ValidationMode.UNTRACED,
    ValidationMode.CALLS,
    ValidationMode.OPCODES,
    ValidationMode.NATIVE,
)
AUTO = "auto"  # the setting that lets the node decide
NATIVE, OPCODES, CALLS, UNTRACED = _ORDER[::-1]


@dataclass(frozen=True, slots=True)
class Rule:
    rule: str
    what: str
    untraced: bool = False  # enforced without a trace (by simulation's result, or reputation)
    native_gap: str = ""  # what geth's erc7562Tracer output leaves out of it, if anything

    @property
    def modes(self) -> frozenset[ValidationMode]:
        modes = {NATIVE, OPCODES}
        if self.rule in CALLS_MODE_RULES:
            modes.add(CALLS)
        if self.untraced:
            modes |= {CALLS, UNTRACED}
        return frozenset(modes)

    def cell(self, mode: ValidationMode) -> str:
        """Whether `mode` enforces the rule, and what of it it misses or how it sees it."""
        if mode not in self.modes:
            return "—"
        missed = self.native_gap if mode is NATIVE else ""
        if mode is CALLS:
            missed = CALLS_MODE_UNCHECKED.get(self.rule, "")
            seen = CALLS_MODE_RULES.get(self.rule, "")
            if not missed and seen and not seen.startswith("partly"):
                return f"yes: {seen}"
        return f"in part: not {missed}" if missed else "yes"


_BEFORE_RETURN = "one right before RETURN or REVERT, which the tracer does not report"
RULES: tuple[Rule, ...] = (
    Rule("OP-011", "no environment opcode (TIMESTAMP, NUMBER, ORIGIN, …), CREATE, INVALID, "
         "SELFDESTRUCT"),
    Rule("OP-012", "GAS only right before a *CALL", native_gap=_BEFORE_RETURN),
    Rule("OP-013", "no unassigned opcode"),
    Rule("OP-020", "no frame runs out of gas"),
    Rule("OP-031", "CREATE2 once, by the factory, for the sender"),
    Rule("OP-032", "the new sender's own code may CREATE"),
    Rule("OP-033", "a staked factory may CREATE and CREATE2"),
    Rule("OP-041", "no call or EXTCODE* to an address without code", native_gap=_BEFORE_RETURN),
    Rule("OP-042", "the sender may be called by the factory phase before it has code"),
    Rule("OP-051", "EXTCODESIZE of the EntryPoint only before ISZERO"),
    Rule("OP-052", "the EntryPoint's depositTo may be called"),
    Rule("OP-053", "the EntryPoint's fallback may be called (value transfer)"),
    Rule("OP-054", "nothing else of the EntryPoint is used", native_gap=_BEFORE_RETURN),
    Rule("OP-061", "no CALL with value, but to the EntryPoint"),
    Rule("OP-062", "only the chain's supported precompiles"),
    Rule("OP-070", "transient storage judged as storage"),
    Rule("OP-080", "BALANCE and SELFBALANCE only with stake"),
    Rule("STO-010", "the sender's own storage"),
    Rule("STO-021", "another contract's storage only where associated with the sender"),
    Rule("STO-022", "associated storage before the sender exists only with a staked factory"),
    Rule("STO-031", "an entity's own storage only with stake"),
    Rule("STO-032", "a staked entity's associated storage in another contract"),
    Rule("STO-033", "a staked entity reads any other contract's storage"),
    Rule("STO-040", "an entity's address is not used as another op's sender"),
    Rule("STO-041", "a sender's associated storage is not another op's sender"),
    Rule("COD-010", "the code validation used is unchanged when the op is bundled"),
    Rule("EREP-050", "a paymaster returning a context is staked", untraced=True),
    Rule("EREP-060", "a staked factory's sender may CREATE2, as may the factory"),
    Rule("SREP/UREP/EREP", "reputation, throttling and stake of senders and entities",
         untraced=True),
)  # fmt: skip


def enforced_by(mode: ValidationMode) -> tuple[str, ...]:
    return tuple(r.rule for r in RULES if mode in r.modes)


def unchecked_by(mode: ValidationMode) -> tuple[str, ...]:
    """The rules `mode` cannot see at all (those it sees in part are enforced)."""
    return tuple(r.rule for r in RULES if mode not in r.modes)


def parse_mode(value: str | None) -> ValidationMode | None:
    """A setting's mode: None for "auto" (or unset)."""
    if value is None or value == AUTO:
        return None
    try:
        return ValidationMode(value)
    except ValueError:
        choices = ", ".join([AUTO, *(m.value for m in ValidationMode)])
        raise ConfigurationError(f"validation mode {value!r}: choose one of {choices}") from None


# A contract that reads a storage slot, so that a trace of it shows one SLOAD (any node's
# empty account would do for the tracers alone; the read proves the struct logger keeps the
# stack and that state overrides reach debug_traceCall).
_PROBE_ADDRESS = "0x00000000000000000000000000000000e7e7e7e7"
_PROBE_CODE = "0x600154506000600055" + "00"  # PUSH1 1 SLOAD POP PUSH1 0 PUSH1 0 SSTORE STOP
_PROBE_CALL = {"to": _PROBE_ADDRESS, "data": "0x", "gas": hex(100_000)}
_PROBE_OVERRIDE = {_PROBE_ADDRESS: {"code": _PROBE_CODE}}


@dataclass(frozen=True, slots=True)
class NodeTracing:
    """What one node's `debug_traceCall` serves, as `probe_modes` found it."""

    modes: frozenset[ValidationMode]
    refusals: tuple[str, ...] = ()  # why each stronger mode is not served, for the log

    @property
    def strongest(self) -> ValidationMode:
        return max(self.modes, key=lambda m: m.strength)


async def _trace(rpc: JsonRpcClient, options: dict[str, Any]) -> Any:
    params = [_PROBE_CALL, "latest", {"stateOverrides": _PROBE_OVERRIDE, **options}]
    return await rpc.request("debug_traceCall", params, deadline_s=rpc.timeout)


def _native_ok(answer: Any) -> bool:
    return isinstance(answer, dict) and "usedOpcodes" in answer and "accessedSlots" in answer


def _opcodes_ok(answer: Any) -> bool:
    steps = answer.get("structLogs") if isinstance(answer, dict) else None
    return isinstance(steps, list) and any(
        s.get("op") == "SLOAD" and s.get("stack") for s in steps if isinstance(s, dict)
    )


def _calls_ok(call: Any, prestate: Any) -> bool:
    """Both tracers answer, and the overriding code is what ran (a node that ignored the
    override would trace an empty account)."""
    if not isinstance(call, dict) or not isinstance(prestate, dict):
        return False
    probed = next((v for k, v in prestate.items() if k.lower() == _PROBE_ADDRESS), None)
    return (
        str(call.get("to", "")).lower() == _PROBE_ADDRESS
        and isinstance(probed, dict)
        and str(probed.get("code", "")).lower() == _PROBE_CODE
    )


async def probe_modes(rpc: JsonRpcClient) -> NodeTracing:
    """Which validation modes the node serves: one small traced call per tracer, side by
    side. A node that answers none of them (no debug namespace, or a provider refusing it)
    serves `untraced` only. Raises RpcTransportError when the node does not answer at all."""
    answers = await asyncio.gather(
        _trace(rpc, {"tracer": "erc7562Tracer"}),
        _trace(rpc, {"disableStorage": True, "enableMemory": False, "enableReturnData": False}),
        _trace(rpc, {"tracer": "callTracer"}),
        _trace(rpc, {"tracer": "prestateTracer"}),
        return_exceptions=True,
    )
    native, opcodes, call, prestate = answers
    for answer in answers:
        if isinstance(answer, RpcTransportError):
            raise answer
    modes = {UNTRACED}
    refusals = []
    checks: tuple[tuple[ValidationMode, bool, tuple[Any, ...]], ...] = (
        (NATIVE, _native_ok(native), (native,)),
        (OPCODES, _opcodes_ok(opcodes), (opcodes,)),
        (CALLS, _calls_ok(call, prestate), (call, prestate)),
    )
    for mode, ok, given in checks:
        if ok:
            modes.add(mode)
        else:
            refusals.append(f"{mode}: {_why(given)}")
    return NodeTracing(frozenset(modes), tuple(refusals))


def _why(answers: Collection[Any]) -> str:
    for answer in answers:
        if isinstance(answer, RpcError):
            return f"the node refused ({answer.message[:80]})"
        if isinstance(answer, BaseException):
            return type(answer).__name__
    return "the answer lacks what validation reads"


def choose_mode(
    tracing: NodeTracing, pinned: ValidationMode | None, *, where: str
) -> ValidationMode:
    """The pinned mode if the node serves it, else the strongest it serves; a pinned mode the
    node cannot serve stops the chain (`where` names it in the error)."""
    if pinned is None:
        return tracing.strongest
    if pinned not in tracing.modes:
        reasons = "; ".join(r for r in tracing.refusals if r.startswith(pinned.value))
        raise ConfigurationError(
            f"{where}: validation_mode {pinned.value} is pinned, but the node cannot serve it "
            f"({reasons or 'not offered'}); it serves {tracing.strongest.value} at most"
        )
    return pinned


def describe(mode: ValidationMode) -> str:
    """One line for logs and `config check`: the mode and what it leaves unchecked."""
    if mode.complete:
        return f"{mode.value} (every ERC-7562 rule enforced)"
    if mode is UNTRACED:
        return (
            f"{mode.value} (no ERC-7562 tracing: the EntryPoint's own checks, stake and reputation)"
        )
    return f"{mode.value} (not enforced: {', '.join(unchecked_by(mode))})"


class NodeModes:
    """A chain's validation mode, kept in step with the node endpoint answering: when reads
    fail over to another URL, that node is probed and the mode follows what it can trace
    (a failover to a weaker node weakens validation with it, and says so). A pinned mode the
    new node cannot serve, or an unpinned fall to `untraced` where ops are not accountable,
    refuses validation until a capable endpoint answers again."""

    def __init__(
        self,
        rpc: JsonRpcClient,
        mode: ValidationMode,
        pinned: ValidationMode | None,
        *,
        accountable_ops: bool,
        where: str,
    ) -> None:
        self.rpc = rpc
        self.mode: ValidationMode | None = mode  # None: the answering node cannot serve
        self.pinned = pinned
        self.accountable_ops = accountable_ops
        self.where = where
        self.refusal = ""
        self._endpoint = rpc.answering_endpoint
        self._probing: asyncio.Lock = asyncio.Lock()

    async def current(self) -> ValidationMode:
        """The mode to validate in now; ConfigurationError while the answering node cannot
        serve one."""
        if self.rpc.answering_endpoint != self._endpoint:
            async with self._probing:
                if self.rpc.answering_endpoint != self._endpoint:
                    await self._probe()
        if self.mode is None:
            raise ConfigurationError(self.refusal)
        return self.mode

    async def _probe(self) -> None:
        endpoint = self.rpc.answering_endpoint
        tracing = await probe_modes(self.rpc)
        self._endpoint = endpoint  # probed: the next change is the next failover
        before = self.mode
        try:
            mode = choose_mode(tracing, self.pinned, where=self.where)
        except ConfigurationError as exc:
            self.mode, self.refusal = None, str(exc)
            log.error("%s: endpoint #%d now answers; %s", self.where, endpoint + 1, exc)
            return
        if mode is UNTRACED and self.pinned is None and not self.accountable_ops:
            self.mode = None
            self.refusal = f"{self.where}: the node now answering serves no tracer; ops refused"
            log.error("%s (endpoint #%d)", self.refusal, endpoint + 1)
            return
        self.mode = mode
        if mode != before:
            log.warning(
                "%s: endpoint #%d now answers; validation mode %s", self.where, endpoint + 1,
                describe(mode),
            )  # fmt: skip


def rules_table() -> str:
    """`RULES` as the Markdown table docs/bundler.md prints (a test holds the two equal)."""
    rows = [
        "| rule | what | native | opcodes | calls | untraced |",
        "|---|---|---|---|---|---|",
    ]
    for r in RULES:
        cells = [r.cell(mode) for mode in (NATIVE, OPCODES, CALLS, UNTRACED)]
        rows.append(f"| {r.rule} | {r.what} | {' | '.join(cells)} |")
    return "\n".join(rows)
