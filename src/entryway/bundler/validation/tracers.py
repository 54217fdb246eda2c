"""How each validation mode traces an op's validation and reads the trace into the facts the
ERC-7562 rules judge (`trace.ValidationTrace`).

A mode's tracer traces one of two calls: the replay of the op's entity calls
(`Simulator.trace_replay`, the usual path) or `simulateValidation` itself (EIP-7702 ops,
EntryPoint v0.6, and a replay that did not run as its simulation did). Whatever the mode,
the op's result comes from the simulation; the trace only shows what validation did.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from entryway.bundler.validation.modes import ValidationMode
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


def tracer_for(mode: ValidationMode) -> ValidationTracer | None:
    """The tracer of a traced mode; None for `untraced`."""
    tracers: dict[ValidationMode, ValidationTracer] = {
        ValidationMode.OPCODES: StructLogTracer(),
    }
    if mode is ValidationMode.UNTRACED:
        return None
    if mode not in tracers:
        raise NotImplementedError(f"validation mode {mode.value} is not built yet")
    return tracers[mode]
