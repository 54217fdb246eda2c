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
from typing import Any, Protocol

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


@dataclass(frozen=True, slots=True)
class Parties:
    """Whose calls split a trace into phases."""

    entry_point: str
    sender_creator: str
    sender: str
    paymaster: str | None


@dataclass(slots=True)
class TracedCall:
    trace: ValidationTrace
    output: bytes  # what the traced call returned (or its revert data)
    failed: bool


class ValidationTracer(Protocol):
    mode: ValidationMode

    async def replay(
        self,
        simulator: TracingSimulator,
        calls: ValidationCalls,
        parties: Parties,
        extra: dict[str, Any] | None,
    ) -> TracedCall: ...

    async def simulation(
        self,
        simulator: TracingSimulator,
        op: UserOperation,
        parties: Parties,
        extra: dict[str, Any] | None,
    ) -> TracedCall: ...

    async def preimages(
        self,
        simulator: TracingSimulator,
        calls: ValidationCalls | None,
        op: UserOperation,
        extra: dict[str, Any] | None,
    ) -> list[bytes]:
        """The KECCAK256 inputs of the traced call, for a tracer whose trace lacks them."""
        ...


class StructLogTracer:
    """`opcodes`: the default struct logger, every step; memory off, so KECCAK256 inputs are
    collected by a second, JavaScript, trace when an associated-storage rule needs them."""

    mode = ValidationMode.OPCODES

    async def replay(
        self,
        simulator: TracingSimulator,
        calls: ValidationCalls,
        parties: Parties,
        extra: dict[str, Any] | None,
    ) -> TracedCall:
        return _read_struct_logs(await simulator.trace_replay(calls, extra=extra), parties)

    async def simulation(
        self,
        simulator: TracingSimulator,
        op: UserOperation,
        parties: Parties,
        extra: dict[str, Any] | None,
    ) -> TracedCall:
        return _read_struct_logs(await simulator.trace_validation(op, extra=extra), parties)

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


def _read_struct_logs(result: Any, parties: Parties) -> TracedCall:
    trace = parse_struct_logs(
        result["structLogs"],
        entry_point=parties.entry_point,
        sender_creator=parties.sender_creator,
        sender=parties.sender,
        paymaster=parties.paymaster,
    )
    output = hex_to_bytes(result.get("returnValue") or "0x")
    return TracedCall(trace, output, bool(result.get("failed")))


class NativeTracer:
    """`native`: geth's `erc7562Tracer`, one call whose answer carries every fact and the
    KECCAK256 inputs (`native_trace`). No `tracerConfig`: its `ignoredOpcodes` would replace
    a default list that hides none of the opcodes the rules watch."""

    mode = ValidationMode.NATIVE
    name = "erc7562Tracer"

    async def replay(
        self,
        simulator: TracingSimulator,
        calls: ValidationCalls,
        parties: Parties,
        extra: dict[str, Any] | None,
    ) -> TracedCall:
        return _read_native(await simulator.trace_replay(calls, self.name, extra), parties)

    async def simulation(
        self,
        simulator: TracingSimulator,
        op: UserOperation,
        parties: Parties,
        extra: dict[str, Any] | None,
    ) -> TracedCall:
        return _read_native(await simulator.trace_validation(op, self.name, extra), parties)

    async def preimages(
        self,
        simulator: TracingSimulator,
        calls: ValidationCalls | None,
        op: UserOperation,
        extra: dict[str, Any] | None,
    ) -> list[bytes]:
        return []  # the trace carried them all


def _read_native(frame: Any, parties: Parties) -> TracedCall:
    trace = parse_native_trace(
        frame,
        entry_point=parties.entry_point,
        sender_creator=parties.sender_creator,
        sender=parties.sender,
        paymaster=parties.paymaster,
    )
    return TracedCall(trace, _output(frame), bool(frame.get("error")))


def _output(frame: Any) -> bytes:
    return hex_to_bytes(frame.get("output") or "0x")


class CallTracers:
    """`calls`: what hosted providers sell, `callTracer` and `prestateTracer` (plain, and in
    diff mode for the writes), three calls side by side (`call_trace` says what they show and
    what they cannot)."""

    mode = ValidationMode.CALLS
    _TRACERS: tuple[tuple[str, dict[str, Any] | None], ...] = (
        ("callTracer", None),
        ("prestateTracer", None),
        ("prestateTracer", {"diffMode": True}),
    )

    async def replay(
        self,
        simulator: TracingSimulator,
        calls: ValidationCalls,
        parties: Parties,
        extra: dict[str, Any] | None,
    ) -> TracedCall:
        answers = await asyncio.gather(
            *(simulator.trace_replay(calls, t, extra, config) for t, config in self._TRACERS)
        )
        frame, prestate, diff = answers
        return _read_calls(frame, prestate, diff, parties)

    async def simulation(
        self,
        simulator: TracingSimulator,
        op: UserOperation,
        parties: Parties,
        extra: dict[str, Any] | None,
    ) -> TracedCall:
        answers = await asyncio.gather(
            *(simulator.trace_validation(op, t, extra, config) for t, config in self._TRACERS)
        )
        frame, prestate, diff = answers
        return _read_calls(frame, prestate, diff, parties)

    async def preimages(
        self,
        simulator: TracingSimulator,
        calls: ValidationCalls | None,
        op: UserOperation,
        extra: dict[str, Any] | None,
    ) -> list[bytes]:
        return []  # the trace carried its guesses; no node here can say more


def _read_calls(frame: Any, prestate: Any, diff: Any, parties: Parties) -> TracedCall:
    trace = calls_trace(
        frame,
        prestate,
        diff,
        entry_point=parties.entry_point,
        sender_creator=parties.sender_creator,
        sender=parties.sender,
        paymaster=parties.paymaster,
    )
    return TracedCall(trace, _output(frame), bool(frame.get("error")))


_TRACERS: dict[ValidationMode, ValidationTracer] = {
    ValidationMode.NATIVE: NativeTracer(),
    ValidationMode.OPCODES: StructLogTracer(),
    ValidationMode.CALLS: CallTracers(),
}


def tracer_for(mode: ValidationMode) -> ValidationTracer | None:
    """The tracer of a traced mode; None for `untraced`."""
    return _TRACERS.get(mode)
