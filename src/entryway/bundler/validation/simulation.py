"""Validation by simulation: `simulateValidation` of EntryPointSimulations run at the
EntryPoint's address through a state override, and the entities' validation calls traced by
the struct logger and judged by the ERC-7562 rules.

Two node calls run side by side for a traced validation. The op's result (validation data,
prefund, stakes, FailedOp) comes from an untraced `simulateValidation` of the release's
EntryPointSimulations. The trace comes from `traceValidation` (contracts/
EntrywaySimulations.sol), which makes only the calls the EntryPoint makes to the op's
factory, account and paymaster, with the same calldata, gas limits and order: about a fifth
of the steps of a traced `simulateValidation`, whose other four fifths are the EntryPoint's
own bookkeeping that no ERC-7562 rule looks at. EIP-7702 ops, and any op whose replay does
not run as its simulation did, are traced through `simulateValidation` itself.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from entryway import contracts
from entryway.bundler.errors import BundlerError, RpcErrorCode
from entryway.bundler.validation.code_used import CodeUsed
from entryway.bundler.validation.modes import NodeModes, ValidationMode
from entryway.bundler.validation.outcome import (
    MIN_VALIDITY_BLOCKS,
    MIN_VALIDITY_S,
    ValidationData,
    ValidationOutcome,
)
from entryway.bundler.validation.rules import (
    PreimagesNeeded,
    RuleSettings,
    StakeInfo,
    check,
)
from entryway.bundler.validation.struct_logs import decode_struct_logs
from entryway.bundler.validation.trace import ValidationTrace
from entryway.bundler.validation.tracers import Parties, ValidationTracer, tracer_for
from entryway.bundler.validation.validation_calls import ValidationCalls, validation_calls
from entryway.chain.rpc import EthClient, RpcError
from entryway.contracts.abi import DecodedError
from entryway.domain.entry_points import EntryPointVersion, release, version_at
from entryway.domain.evm import hex_to_bytes, keccak, to_hex
from entryway.domain.userop import UserOperation, user_op_hash
from entryway.errors import ConfigurationError

log = logging.getLogger("entryway.bundler")
SIMULATIONS = contracts.load("EntryPointSimulations")
_SIMULATE_VALIDATION = SIMULATIONS.abi.selector("simulateValidation")
# Validation may not take more than this, whatever the op's limits say.
SIMULATION_GAS_CAP = 20_000_000
# Validation simulates on the latest block, as other bundlers do. The pending block is dear
# on some nodes: anvil executes every transaction of its pool again for each call on it
# (measured: the node's CPU per op three times as high under load, while bundles wait to be
# mined). An op the EntryPoint refuses on the latest block is checked again on the pending
# one (`PENDING_BLOCK`): it may rely on a transaction not mined yet (its sender funded, its
# previous op in a bundle of ours sent a moment ago).
SIMULATION_BLOCK = "latest"
PENDING_BLOCK = "pending"
# What the EntryPoint says of an op that a transaction still pending could change.
_REFUSALS = (RpcErrorCode.REJECTED_BY_EP_OR_ACCOUNT, RpcErrorCode.REJECTED_BY_PAYMASTER)
# Calls per JSON-RPC batch. Each simulation carries EntryPointSimulations' code (about
# 50 kB of hex) in its state override: 16 keep a batch under a megabyte, and hosted nodes'
# caps on a batch's length (commonly 50 or more) out of reach. The batches go side by side.
BATCH_CALLS = 16
_STRUCT_LOGGER = {"disableStorage": True, "enableMemory": False, "enableReturnData": False}


def failed_op_error(decoded: DecodedError) -> BundlerError:
    """FailedOp / FailedOpWithRevert from the EntryPoint, as the bundler RPC reports them."""
    reason = str(decoded.args[1]) if len(decoded.args) > 1 else decoded.name
    data: dict[str, Any] | None = None
    if decoded.name == "FailedOpWithRevert" and len(decoded.args) > 2:
        inner = decoded.args[2]
        data = {"revertData": to_hex(inner)}
        nested = SIMULATIONS.abi.decode_error(inner)
        if nested is not None:
            reason = f"{reason}: {nested}"
    code = (
        RpcErrorCode.REJECTED_BY_PAYMASTER
        if reason.startswith("AA3")
        else RpcErrorCode.REJECTED_BY_EP_OR_ACCOUNT
    )
    return BundlerError(code, reason, data)


def revert_error(raw: bytes | None, fallback: str) -> BundlerError:
    decoded = SIMULATIONS.abi.decode_error(raw or b"")
    if decoded is None:
        return BundlerError(RpcErrorCode.REJECTED_BY_EP_OR_ACCOUNT, fallback)
    if decoded.name in ("FailedOp", "FailedOpWithRevert"):
        return failed_op_error(decoded)
    return BundlerError(RpcErrorCode.REJECTED_BY_EP_OR_ACCOUNT, str(decoded))


def simulation_artifacts(
    version: EntryPointVersion,
) -> tuple[contracts.Artifact, contracts.Artifact]:
    """The release's EntryPointSimulations, and EntrywaySimulations built on it."""
    r = release(version)
    return (
        contracts.load(r.artifact("EntryPointSimulations")),
        contracts.load(r.artifact("EntrywaySimulations")),
    )


class Simulator:
    """Runs the EntryPoint release's EntryPointSimulations against the live chain state."""

    # Whether `trace_replay` may stand in for a traced `simulateValidation`.
    replays = True
    # Whether an op that validates may still revert a whole bundle when executed
    # (`check_execution`): v0.6 only. From v0.7 on, an op whose limits pay less than it spends
    # is charged its prefund (UserOperationPrefundTooLow) and the bundle goes through.
    checks_execution = False

    def __init__(
        self, eth: EthClient, entry_point: str, version: EntryPointVersion | None = None
    ) -> None:
        self.eth = eth
        self.entry_point = entry_point
        self.version = version or version_at(entry_point)
        self.simulations, replay = simulation_artifacts(self.version)
        self.override = {entry_point: {"code": to_hex(self.simulations.deployed_bytecode)}}
        self.replay_override = {entry_point: {"code": to_hex(replay.deployed_bytecode)}}
        self.block = SIMULATION_BLOCK

    def on_pending(self) -> Simulator:
        """The same simulator, on the pending block."""
        pending = copy.copy(self)
        pending.block = PENDING_BLOCK
        return pending

    def _call_object(self, data: bytes) -> dict[str, str]:
        return {"to": self.entry_point, "data": to_hex(data), "gas": hex(SIMULATION_GAS_CAP)}

    def _override(self, extra: dict[str, Any] | None) -> dict[str, Any]:
        return self.override if not extra else {**extra, **self.override}

    async def call(
        self, fn: str, *args: Any, extra: dict[str, Any] | None = None
    ) -> tuple[Any, ...]:
        return await self._call(fn, self.simulations.abi.encode_call(fn, *args), extra)

    async def simulate_validation(
        self, op: UserOperation, extra: dict[str, Any] | None = None
    ) -> tuple[Any, ...]:
        """`simulateValidation(op)`, the calldata written out (the op's one offset word, then
        the op): the same bytes as the ABI encoder's, without its cost on every op."""
        data = _SIMULATE_VALIDATION + (32).to_bytes(32, "big") + op.abi_encoded()
        return await self._call("simulateValidation", data, extra)

    async def check_execution(self, op: UserOperation, extra: dict[str, Any] | None) -> None:
        """Refuse an op whose execution would revert the bundle carrying it (only where
        `checks_execution`)."""
        return None

    def validation_request(
        self, op: UserOperation, extra: dict[str, Any] | None
    ) -> tuple[str, list[Any]] | None:
        """`simulate_validation(op)` as one JSON-RPC call a batch can carry, with
        `validation_result` reading its answer; None where the release's simulation is not
        a plain eth_call returning its result."""
        data = _SIMULATE_VALIDATION + (32).to_bytes(32, "big") + op.abi_encoded()
        call = {"to": self.entry_point, "data": to_hex(data)}
        return ("eth_call", [call, self.block, self._override(extra)])

    def validation_result(self, answer: Any) -> tuple[Any, ...]:
        """What `simulate_validation` returns, from the answer to `validation_request`: a
        result, or the RpcError the node gave for the call."""
        if isinstance(answer, RpcError):
            raise revert_error(answer.revert_data, answer.message) from None
        return self.simulations.abi.decode_output("simulateValidation", hex_to_bytes(answer))

    async def _call(self, fn: str, data: bytes, extra: dict[str, Any] | None) -> tuple[Any, ...]:
        try:
            raw = await self.eth.call(
                self.entry_point, data, state_override=self._override(extra), block=self.block
            )
        except RpcError as exc:
            raise revert_error(exc.revert_data, exc.message) from None
        return self.simulations.abi.decode_output(fn, raw)

    async def trace_validation(
        self,
        op: UserOperation,
        tracer: str | None = None,
        extra: dict[str, Any] | None = None,
        config: dict[str, Any] | None = None,
    ) -> Any:
        """debug_traceCall of `simulateValidation(op)` itself."""
        data = self.simulations.abi.encode_call("simulateValidation", op.packed())
        return await self._trace(data, self.override, tracer, extra, config)

    def traced_result(self, output: bytes, failed: bool) -> tuple[Any, ...]:
        """`simulateValidation`'s result from what its trace says it returned, as
        `simulate_validation` gives it."""
        if failed:
            raise revert_error(output, "simulateValidation reverted")
        return self.simulations.abi.decode_output("simulateValidation", output)

    async def trace_replay(
        self,
        calls: ValidationCalls,
        tracer: str | None = None,
        extra: dict[str, Any] | None = None,
        config: dict[str, Any] | None = None,
    ) -> Any:
        """debug_traceCall of EntrywaySimulations' `traceValidation` at the EntryPoint: the
        replay of an op's entity calls."""
        return await self._trace(calls.calldata(), self.replay_override, tracer, extra, config)

    async def _trace(
        self,
        data: bytes,
        override: dict[str, Any],
        tracer: str | None,
        extra: dict[str, Any] | None,
        config: dict[str, Any] | None = None,
    ) -> Any:
        """debug_traceCall under the override: with a named `tracer` (and its `config`), or
        with the struct logger, its answer read lazily (`struct_logs`)."""
        options: dict[str, Any] = {"stateOverrides": {**(extra or {}), **override}}
        if tracer is not None:
            options["tracer"] = tracer
            if config is not None:
                options["tracerConfig"] = config
            return await self.eth.rpc.request(
                "debug_traceCall", [self._call_object(data), self.block, options]
            )
        options.update(_STRUCT_LOGGER)
        return await self.eth.rpc.request(
            "debug_traceCall",
            [self._call_object(data), self.block, options],
            decode=decode_struct_logs,  # steps decoded only where the rules look
        )


def _outcome(result: tuple[Any, ...]) -> ValidationOutcome:
    (return_info, sender_info, factory_info, paymaster_info, _aggregator) = result[0]
    pre_op_gas, prefund, account_data, paymaster_data, context = return_info
    return ValidationOutcome(
        pre_op_gas=pre_op_gas,
        prefund=prefund,
        account=ValidationData.unpack(account_data),
        paymaster=ValidationData.unpack(paymaster_data),
        paymaster_context=context,
        sender_stake=StakeInfo(*sender_info),
        factory_stake=StakeInfo(*factory_info),
        paymaster_stake=StakeInfo(*paymaster_info),
    )


class Validator:
    """Validates ops by simulation and, in a traced `mode`, judges their trace by ERC-7562
    (`modes` says what each mode enforces)."""

    def __init__(
        self,
        simulator: Simulator,
        sender_creator: str,
        settings: RuleSettings,
        chain_id: int,
        *,
        mode: ValidationMode = ValidationMode.OPCODES,
    ) -> None:
        self.simulator = simulator
        self.sender_creator = sender_creator
        self.chain_id = chain_id
        self.settings = settings
        self.mode = mode
        # Where set, the mode follows the node answering (a failover to a weaker node).
        self.node_modes: NodeModes | None = None
        # Whose code each sender's last admission hashed (shared with `on_pending`'s copy).
        self.code_used = CodeUsed()

    @property
    def mode(self) -> ValidationMode:
        return self._mode

    @mode.setter
    def mode(self, mode: ValidationMode) -> None:
        self._tracer: ValidationTracer | None = tracer_for(mode)
        self._mode = mode

    @property
    def tracing(self) -> bool:
        return self._tracer is not None

    async def validate(
        self,
        op: UserOperation,
        *,
        now: int,
        block: int | None = None,
        trace: bool | None = None,
        op_hash: bytes | None = None,
        check: bool = True,
        execution: bool = True,
    ) -> ValidationOutcome:
        """Simulate `op`'s validation; with tracing, also enforce ERC-7562. `now` is the time
        the next block may carry (the later of the wall clock and the latest block's),
        `block` the latest block's number (for v0.9's validity ranges in blocks); `op_hash`
        is the op's userOpHash if the caller has it already. Unless not `check`, the outcome
        is then checked (`check`). With `execution`, an op whose execution would revert its
        bundle is refused too, where the release can do that (v0.6: `check_execution`,
        simulated beside the validation). An op the EntryPoint refuses on the latest block
        is checked again on the pending one."""
        args = (op, now, block, trace, op_hash, check, execution)
        await self._follow_node()
        try:
            return await self._validate(*args)
        except BundlerError as exc:
            if not self._may_pass_on_pending(exc):
                raise
        return await self.on_pending()._validate(*args)

    async def _follow_node(self) -> None:
        """The mode the node now answering serves (`NodeModes`); refused while it serves none
        this chain may validate in."""
        if self.node_modes is None:
            return
        try:
            mode = await self.node_modes.current()
        except ConfigurationError as exc:
            raise BundlerError(RpcErrorCode.INTERNAL_ERROR, str(exc)) from None
        if mode is not self.mode:
            self.mode = mode

    def _may_pass_on_pending(self, refusal: BaseException | ValidationOutcome) -> bool:
        """Whether an op refused so on the latest block is worth simulating again on the
        pending one (a refusal by the EntryPoint, and this validator not already there)."""
        return (
            isinstance(refusal, BundlerError)
            and refusal.code in _REFUSALS
            and self.simulator.block != PENDING_BLOCK
        )

    def on_pending(self) -> Validator:
        """The same validator, simulating on the pending block."""
        pending = copy.copy(self)
        pending.simulator = self.simulator.on_pending()
        return pending

    async def _validate(
        self,
        op: UserOperation,
        now: int,
        block: int | None,
        trace: bool | None,
        op_hash: bytes | None,
        check: bool,
        execution: bool,
    ) -> ValidationOutcome:
        extra = eip7702_override(op)
        if self.tracing and trace is not False:
            validation = self._traced(op, extra, op_hash)
        else:
            validation = self._untraced(op, extra)
        if execution and self.simulator.checks_execution:
            outcome, executed = await asyncio.gather(
                validation, self.simulator.check_execution(op, extra), return_exceptions=True
            )
            if isinstance(outcome, BaseException):
                raise outcome  # the validation's own refusal comes first
            if isinstance(executed, BaseException):
                raise executed
        else:
            outcome = await validation
        if check:
            self.check(outcome, now, block)
        return outcome

    async def _untraced(self, op: UserOperation, extra: dict[str, Any] | None) -> ValidationOutcome:
        return _outcome(await self.simulator.simulate_validation(op, extra))

    def check(self, outcome: ValidationOutcome, now: int, block: int | None = None) -> None:
        """`check_outcome`, validity ranges read as this EntryPoint release reads them (v0.9's
        in blocks)."""
        in_blocks = self.simulator.version is EntryPointVersion.V09
        check_outcome(outcome, now, block if in_blocks else None)

    async def _resolve_code_copies(self, trace: ValidationTrace) -> None:
        """EXTCODECOPY leaves nothing on the stack to tell whether its target has code; ask
        the node, for those (rare) targets only."""
        for phase in trace.phases.values():
            for access in phase.code_accesses:
                if access.opcode == "EXTCODECOPY" and access.result is None:
                    access.result = len(await self.simulator.eth.get_code(access.target))

    def _parties(self, op: UserOperation) -> Parties:
        return Parties(self.simulator.entry_point, self.sender_creator, op.sender, op.paymaster)

    async def _traced(
        self, op: UserOperation, extra: dict[str, Any] | None, op_hash: bytes | None
    ) -> ValidationOutcome:
        tracer = self._tracer
        assert tracer is not None  # a traced mode
        if op.is_eip7702 or not self.simulator.replays:
            return await self._traced_simulation(tracer, op, extra)
        if op_hash is None:
            op_hash = user_op_hash(
                op, self.simulator.entry_point, self.chain_id, version=self.simulator.version
            )
        calls = validation_calls(op, op_hash, self.sender_creator)
        simulated, replayed, read = await asyncio.gather(
            self.simulator.simulate_validation(op, extra),
            tracer.replay(self.simulator, calls, self._parties(op), extra),
            self._read_code(self.code_used.expected(op)),
            return_exceptions=True,
        )
        if isinstance(simulated, BaseException):
            raise simulated  # the op's own failure comes first, whatever the trace says
        if isinstance(replayed, BaseException):
            raise replayed
        outcome = _outcome(simulated)
        ran = int.from_bytes(replayed.output, "big")  # one uint256, phasesRun
        if replayed.failed or ran != calls.phases:
            # Simulation passed and its replay did not: trust only the full trace.
            log.warning("validation replay of %s diverged; tracing simulateValidation", op.sender)
            return await self._traced_simulation(tracer, op, extra)
        codes = {} if isinstance(read, BaseException) else read  # read again below if needed
        return await self._judged(tracer, op, extra, outcome, replayed.trace, calls, codes)

    async def _traced_simulation(
        self, tracer: ValidationTracer, op: UserOperation, extra: dict[str, Any] | None
    ) -> ValidationOutcome:
        traced = await tracer.simulation(self.simulator, op, self._parties(op), extra)
        outcome = _outcome(self.simulator.traced_result(traced.output, traced.failed))
        return await self._judged(tracer, op, extra, outcome, traced.trace, None)

    async def _judged(
        self,
        tracer: ValidationTracer,
        op: UserOperation,
        extra: dict[str, Any] | None,
        outcome: ValidationOutcome,
        trace: ValidationTrace,
        replayed_calls: ValidationCalls | None,
        codes: dict[str, bytes] | None = None,
    ) -> ValidationOutcome:
        """ERC-7562 on the trace; `replayed_calls` says which call it traces (traceValidation
        with these arguments, or simulateValidation when None). `codes`: code hashes read
        beside the simulation (`CodeUsed`); the others are read after."""
        who = outcome.entities(self.simulator.entry_point, op)
        await self._resolve_code_copies(trace)
        context = outcome.paymaster_context
        try:
            violations = check(trace, who, self.settings, context)
        except PreimagesNeeded:
            trace.keccak_preimages = await tracer.preimages(
                self.simulator, replayed_calls, op, extra
            )
            violations = check(trace, who, self.settings, context)
        if violations:
            first = violations[0]
            raise BundlerError(first.code, first.message, {"rule": first.rule})
        touched = {
            access.address
            for phase in trace.phases.values()
            for access in phase.storage
            if access.address not in (self.simulator.entry_point, op.sender)
        }
        used = _code_used(trace, op, self.simulator.entry_point)
        codes = dict(codes or {})
        codes.update(await self._read_code(used - codes.keys()))
        self.code_used.seen(op, used)
        hashes = tuple((a, codes[a]) for a in sorted(used))
        return replace(outcome, storage_touched=frozenset(touched), code_hashes=hashes)

    async def _read_code(self, addresses: set[str]) -> dict[str, bytes]:
        return dict(await self.code_hashes(addresses)) if addresses else {}

    async def code_hashes(self, addresses: set[str]) -> tuple[tuple[str, bytes], ...]:
        """keccak256 of each address's code now, in one batch."""
        ordered = sorted(addresses)
        codes = await self.simulator.eth.rpc.batch(
            [("eth_getCode", [a, self.simulator.block]) for a in ordered]
        )
        return tuple((a, keccak(hex_to_bytes(c))) for a, c in zip(ordered, codes, strict=True))

    async def revalidate(
        self,
        ops: Sequence[UserOperation],
        outcomes: Sequence[ValidationOutcome],
        *,
        now: int,
        block: int,
    ) -> tuple[list[ValidationOutcome | BaseException], list[str | None]]:
        """The second validation of ops about to be bundled (untraced: the trace ran at
        admission), each op's outcome or error; and COD-010 for each (`changed_code`, given
        the `outcomes` of their admission). One JSON-RPC batch carries it all where the
        release allows (a bundle of a hundred ops is one exchange with the node, not a
        hundred); else the calls run side by side."""
        requests = [self.simulator.validation_request(op, eip7702_override(op)) for op in ops]
        if any(r is None for r in requests):
            checks = asyncio.gather(
                *(
                    # The bundle's own eth_call catches an op that would revert it.
                    self.validate(op, now=now, block=block, trace=False, execution=False)
                    for op in ops
                ),
                return_exceptions=True,
            )
            results, changes = await asyncio.gather(checks, self.changed_code(outcomes))
            return list(results), changes
        addresses = sorted({a for outcome in outcomes for a, _ in outcome.code_hashes})
        calls = [r for r in requests if r is not None]
        calls += [("eth_getCode", [a, self.simulator.block]) for a in addresses]
        chunks = await asyncio.gather(
            *(
                self.simulator.eth.rpc.batch_outcomes(calls[at : at + BATCH_CALLS])
                for at in range(0, len(calls), BATCH_CALLS)
            )
        )
        answers: list[Any] = [answer for chunk in chunks for answer in chunk]
        in_blocks = self.simulator.version is EntryPointVersion.V09
        checked: list[ValidationOutcome | BaseException] = []
        for answer in answers[: len(ops)]:
            try:
                outcome = _outcome(self.simulator.validation_result(answer))
                check_outcome(outcome, now, block if in_blocks else None)
                checked.append(outcome)
            except BundlerError as exc:
                checked.append(exc)
        codes = answers[len(ops) :]
        for code in codes:
            if isinstance(code, RpcError):
                raise code
        await self._again_on_pending(ops, checked, now=now, block=block)
        now_hashes = {a: keccak(hex_to_bytes(c)) for a, c in zip(addresses, codes, strict=True)}
        changes = [
            next((a for a, h in outcome.code_hashes if now_hashes.get(a) != h), None)
            for outcome in outcomes
        ]
        return checked, changes

    async def _again_on_pending(
        self,
        ops: Sequence[UserOperation],
        checked: list[ValidationOutcome | BaseException],
        *,
        now: int,
        block: int,
    ) -> None:
        """The ops the EntryPoint refused on the latest block, checked again on the pending
        one (in place): an op may rely on a transaction that the bundle will land after."""
        again = [i for i, result in enumerate(checked) if self._may_pass_on_pending(result)]
        if not again:
            return
        pending = self.on_pending()
        results = await asyncio.gather(
            *(
                pending._validate(
                    ops[i], now, block, trace=False, op_hash=None, check=True, execution=False
                )
                for i in again
            ),
            return_exceptions=True,
        )
        for i, result in zip(again, results, strict=True):
            checked[i] = result

    async def changed_code(self, outcomes: Sequence[ValidationOutcome]) -> list[str | None]:
        """COD-010 for ops about to be bundled: for each, the first contract whose code
        changed since the op was admitted (one node round trip for them all)."""
        addresses = {a for outcome in outcomes for a, _ in outcome.code_hashes}
        now = dict(await self.code_hashes(addresses)) if addresses else {}
        return [
            next((a for a, h in outcome.code_hashes if now.get(a) != h), None)
            for outcome in outcomes
        ]


def eip7702_override(op: UserOperation) -> dict[str, Any] | None:
    """Simulate as if the op's authorization were already applied: the bundle transaction
    applies it before the EntryPoint runs."""
    if op.eip7702_auth is None:
        return None
    return {op.sender: {"code": to_hex(op.eip7702_auth.delegation_code)}}


def check_outcome(outcome: ValidationOutcome, now: int, block: int | None = None) -> None:
    """Signatures, aggregators and validity windows, as simulation reported them: in time,
    or, given the latest `block` (EntryPoint v0.9), in blocks where the bounds say so."""
    if outcome.account.signature_failed:
        raise BundlerError(RpcErrorCode.INVALID_SIGNATURE, "Invalid UserOp signature")
    if outcome.paymaster.signature_failed:
        raise BundlerError(RpcErrorCode.INVALID_SIGNATURE, "Invalid paymaster signature")
    if outcome.account.has_aggregator:
        raise BundlerError(
            RpcErrorCode.UNSUPPORTED_AGGREGATOR, "signature aggregators are not supported"
        )
    for data in (outcome.account, outcome.paymaster):
        blocks = None if block is None else data.block_range()
        if blocks is not None and block is not None:
            _check_window(blocks[0] + 1, blocks[1], block + 1, MIN_VALIDITY_BLOCKS, "block ")
        else:
            _check_window(data.valid_after, data.valid_until, now, MIN_VALIDITY_S, "")


def _check_window(first: int, last: int, at: int, margin: int, unit: str) -> None:
    if first > at:
        raise BundlerError(
            RpcErrorCode.SHORT_DEADLINE, f"UserOperation is not valid before {unit}{first}"
        )
    if last < at + margin:
        raise BundlerError(
            RpcErrorCode.SHORT_DEADLINE,
            f"UserOperation expires at {unit}{last}, too soon to be bundled",
        )


def _code_used(trace: ValidationTrace, op: UserOperation, entry_point: str) -> set[str]:
    """Contracts whose code validation ran or read: the entities and every entered call and
    code access. The EntryPoint is left out (simulation replaces its code), and so is a sender
    the op itself deploys."""
    used = {a for a in (op.factory, op.paymaster) if a is not None}
    if op.factory is None:
        used.add(op.sender)
    for phase in trace.phases.values():
        used.update(c.target for c in phase.calls if c.entered)
        used.update(c.target for c in phase.code_accesses)
    used.discard(entry_point)
    if op.factory is not None or op.eip7702_auth is not None:
        used.discard(op.sender)  # its code is what this op's bundle puts there
    return used
