"""The code an admission hashes (COD-010) is read beside the op's simulation, not after its
trace, once the sender's earlier admission said whose code it uses (real anvil): one node
round trip fewer per validation. The code itself is read afresh every time."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from entryway.bundler.rpc_methods import BundlerRpc
from entryway.chain.rpc import JsonValue
from entryway.chain.transport import RpcTransportError
from entryway.domain.evm import keccak, to_hex
from entryway.domain.userop import UserOperation
from tests.integration.harness import ETHER, Harness


async def _funded_op(harness: Harness) -> UserOperation:
    payer = harness.new_key()
    op = await harness.build_op(payer.address, b"")
    await harness.fund(op.sender, ETHER)
    return harness.sign(op, payer)


def _record(bundler_rpc: BundlerRpc, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """(start|end, method) of the validator's node calls, in the order they happened."""
    rpc = bundler_rpc.bundler.validator.simulator.eth.rpc
    events: list[tuple[str, str]] = []
    request, batch = rpc.request, rpc.batch

    async def requested(method: str, params: Sequence[JsonValue] = (), **kw: Any) -> Any:
        events.append(("start", method))
        try:
            return await request(method, params, **kw)
        finally:
            events.append(("end", method))

    async def batched(calls: Sequence[tuple[str, Sequence[JsonValue]]]) -> list[JsonValue]:
        method = "batch:" + ",".join(sorted({m for m, _ in calls}))
        events.append(("start", method))
        try:
            return await batch(calls)
        finally:
            events.append(("end", method))

    monkeypatch.setattr(rpc, "request", requested)
    monkeypatch.setattr(rpc, "batch", batched)
    return events


async def _validate(bundler_rpc: BundlerRpc, op: UserOperation) -> tuple[tuple[str, bytes], ...]:
    """The code hashes the op's admission would record."""
    _, now, _ = await bundler_rpc.bundler.head.now()
    outcome = await bundler_rpc.bundler.validator.validate(op, now=now)
    return outcome.code_hashes


async def test_a_senders_next_validation_reads_its_code_beside_the_simulation(
    bundler_rpc: BundlerRpc, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    op = await _funded_op(harness)
    first = await _validate(bundler_rpc, op)
    assert first, "the op's validation runs the factory's and the account's code"

    events = _record(bundler_rpc, monkeypatch)
    again = await _validate(bundler_rpc, op)
    assert again == first
    code_reads = [i for i, (at, m) in enumerate(events) if at == "start" and "eth_getCode" in m]
    trace_end = max(i for i, e in enumerate(events) if e == ("end", "debug_traceCall"))
    assert len(code_reads) == 1, events
    assert code_reads[0] < trace_end, "the code is read beside the trace, not after it"


async def test_code_changed_since_is_read_as_it_is_now(
    bundler_rpc: BundlerRpc, harness: Harness
) -> None:
    """Only the addresses are remembered: a contract whose code changed between two
    validations of the sender's ops is hashed as it is at the second."""
    op = await _funded_op(harness)
    first = dict(await _validate(bundler_rpc, op))
    factory = op.factory
    assert factory is not None and factory in first
    code = await harness.eth.get_code(factory)
    changed = code + b"\x00"  # the same behaviour, other bytes
    await harness.eth.rpc.request("anvil_setCode", [factory, to_hex(changed)])
    try:
        again = dict(await _validate(bundler_rpc, op))
    finally:
        await harness.eth.rpc.request("anvil_setCode", [factory, to_hex(code)])
    assert again[factory] == keccak(changed) != first[factory]


async def test_a_failed_early_read_is_made_again_after_the_trace(
    bundler_rpc: BundlerRpc, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The read beside the simulation is a guess made early: when the node fails it, the
    admission reads the code after the trace as before, and records the same hashes."""
    op = await _funded_op(harness)
    first = await _validate(bundler_rpc, op)
    rpc = bundler_rpc.bundler.validator.simulator.eth.rpc
    batch = rpc.batch
    failed: list[bool] = []

    async def failing_once(calls: Sequence[tuple[str, Sequence[JsonValue]]]) -> list[JsonValue]:
        if not failed and all(method == "eth_getCode" for method, _ in calls):
            failed.append(True)
            raise RpcTransportError("the node dropped the connection")
        return await batch(calls)

    monkeypatch.setattr(rpc, "batch", failing_once)
    assert await _validate(bundler_rpc, op) == first
    assert failed == [True]
