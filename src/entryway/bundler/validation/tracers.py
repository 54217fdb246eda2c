"""How each validation mode traces an op's validation and reads the trace into the facts the
ERC-7562 rules judge (`trace.ValidationTrace`).

A mode's tracer traces one of two calls: the replay of the op's entity calls
(`Simulator.trace_replay`, the usual path) or `simulateValidation` itself (EIP-7702 ops,
EntryPoint v0.6, and a replay that did not run as its simulation did). Whatever the mode,
the op's result comes from the simulation; the trace only shows what validation did.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict

from entryway.bundler.validation.call_trace import calls_trace
from entryway.bundler.validation.modes import ValidationMode
from entryway.bundler.validation.native_trace import parse_native_trace
from entryway.bundler.validation.trace import (
    KECCAK_COLLECTOR,
    ValidationTrace,
    parse_struct_logs,
)
from entryway.bundler.validation.validation_calls import ValidationCalls
from entryway.domain.evm import hex_to_bytes
from entryway.domain.userop import UserOperation


class TracingSimulator(Protocol):
    """The part of `simulation.Simulator` a tracer drives."""

    async def trace_replay(
        self,
        calls: ValidationCalls,
        tracer: str | None = None,
        extra: dict[str, Any] | None = None,
        config: dict[str, Any] | None = None,
    ) -> Any: ...

    async def trace_validation(
        self,
        op: UserOperation,
        tracer: str | None = None,
        extra: dict[str, Any] | None = None,
        config: dict[str, Any] | None = None,
    ) -> Any: ...


class PartyNames(TypedDict):
    entry_point: str
    sender_creator: str
    sender: str
    paymaster: str | None


@dataclass(frozen=True, slots=True)
class Parties:
    """Whose calls split a trace into phases."""

    entry_point: str
    sender_creator: str
    sender: str
    paymaster: str | None

    def named(self) -> PartyNames:
        """As the trace readers take them (keyword arguments)."""
        return PartyNames(
            entry_point=self.entry_point,
            sender_creator=self.sender_creator,
            sender=self.sender,
            paymaster=self.paymaster,
        )


@dataclass(slots=True)
class TracedCall:
    trace: ValidationTrace
    output: bytes  # what the traced call returned (or its revert data)
    failed: bool


# A tracer as debug_traceCall names it (None: the default struct logger), and its config.
TracerCall = tuple[str | None, dict[str, Any] | None]


class ValidationTracer:
    """A traced mode: the tracers it asks for, all of the same call and side by side, and
    how it reads their answers into the facts the rules judge (`read`)."""

    mode: ValidationMode
    tracers: tuple[TracerCall, ...]

    def read(self, answers: list[Any], parties: Parties) -> TracedCall:
        raise NotImplementedError

    async def replay(
        self,
        simulator: TracingSimulator,
        calls: ValidationCalls,
        parties: Parties,
        extra: dict[str, Any] | None,
    ) -> TracedCall:
        """The trace of the replay of the op's entity calls."""
        answers = await asyncio.gather(
            *(simulator.trace_replay(calls, name, extra, config) for name, config in self.tracers)
        )
        return self.read(list(answers), parties)

    async def simulation(
        self,
        simulator: TracingSimulator,
        op: UserOperation,
        parties: Parties,
        extra: dict[str, Any] | None,
    ) -> TracedCall:
        """The trace of `simulateValidation(op)` itself."""
        answers = await asyncio.gather(
            *(simulator.trace_validation(op, name, extra, config) for name, config in self.tracers)
        )
        return self.read(list(answers), parties)

    async def preimages(
        self,
        simulator: TracingSimulator,
        calls: ValidationCalls | None,
        op: UserOperation,
        extra: dict[str, Any] | None,
    ) -> list[bytes]:
        """The KECCAK256 inputs of the traced call, for a mode whose trace lacks them (none
        by default: the trace carried them, or no tracer of the node can say more)."""
        return []


class StructLogTracer(ValidationTracer):
    """`opcodes`: the default struct logger, every step; memory off, so KECCAK256 inputs are
    collected by a second, JavaScript, trace when an associated-storage rule needs them."""

    mode = ValidationMode.OPCODES
    tracers = ((None, None),)

    def read(self, answers: list[Any], parties: Parties) -> TracedCall:
        (result,) = answers
        trace = parse_struct_logs(result["structLogs"], **parties.named())
        output = hex_to_bytes(result.get("returnValue") or "0x")
        return TracedCall(trace, output, bool(result.get("failed")))

    async def preimages(
        self,
        simulator: TracingSimulator,
        calls: ValidationCalls | None,
        op: UserOperation,
        extra: dict[str, Any] | None,
    ) -> list[bytes]:
        if calls is None:
            found = await simulator.trace_validation(op, tracer=KECCAK_COLLECTOR, extra=extra)
        else:
            found = await simulator.trace_replay(calls, tracer=KECCAK_COLLECTOR, extra=extra)
        return [hex_to_bytes(p) for p in found]


class NativeTracer(ValidationTracer):
    """`native`: geth's `erc7562Tracer`, one call whose answer carries every fact and the
    KECCAK256 inputs (`native_trace`). No `tracerConfig`: its `ignoredOpcodes` would replace
    a default list that hides none of the opcodes the rules watch."""

    mode = ValidationMode.NATIVE
    tracers = (("erc7562Tracer", None),)

    def read(self, answers: list[Any], parties: Parties) -> TracedCall:
        (frame,) = answers
        trace = parse_native_trace(frame, **parties.named())
        return TracedCall(trace, _output(frame), bool(frame.get("error")))


class CallTracers(ValidationTracer):
    """`calls`: what hosted providers sell, `callTracer` and `prestateTracer` (plain, and in
    diff mode for the writes), three calls side by side (`call_trace` says what they show and
    what they cannot)."""

    mode = ValidationMode.CALLS
    tracers = (
        ("callTracer", None),
        ("prestateTracer", None),
        ("prestateTracer", {"diffMode": True}),
    )

    def read(self, answers: list[Any], parties: Parties) -> TracedCall:
        frame, prestate, diff = answers
        trace = calls_trace(frame, prestate, diff, **parties.named())
        return TracedCall(trace, _output(frame), bool(frame.get("error")))


def _output(frame: Any) -> bytes:
    return hex_to_bytes(frame.get("output") or "0x")


_TRACERS: dict[ValidationMode, ValidationTracer] = {
    ValidationMode.NATIVE: NativeTracer(),
    ValidationMode.OPCODES: StructLogTracer(),
    ValidationMode.CALLS: CallTracers(),
}


def tracer_for(mode: ValidationMode) -> ValidationTracer | None:
    """The tracer of a traced mode; None for `untraced`."""
    return _TRACERS.get(mode)
