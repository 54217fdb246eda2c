"""Validation by simulation for EntryPoint v0.6, which simulates inside the EntryPoint itself.

v0.6's `simulateValidation(op)` always reverts: with `ValidationResult` (or
`ValidationResultWithAggregation`) when the op validates, with `FailedOp` when it does not.
Its answer is put in the shape v0.7's EntryPointSimulations returns, so the Validator judges
both alike. v0.6 reports one signature flag and one validity window for the account and the
paymaster together: the window is carried as the account's, the paymaster's left open, and a
failed signature is refused as the account's or the paymaster's. No code is
overridden, so there is no replay: ERC-7562 judges the trace of `simulateValidation` itself,
whose phases the EntryPoint's calls to the SenderCreator, the sender and the paymaster split
as they do for the later releases.
"""

from __future__ import annotations

from typing import Any

from entryway.bundler.errors import BundlerError, RpcErrorCode
from entryway.bundler.validation.simulation import SIMULATION_BLOCK, Simulator, failed_op_error
from entryway.bundler.validation.validation_calls import ValidationCalls
from entryway.chain.entry_point_v06 import ENTRY_POINT_V06 as ENTRY_POINT_V06
from entryway.chain.entry_point_v06 import answers_as_v06 as answers_as_v06
from entryway.chain.rpc import EthClient, RpcError
from entryway.contracts.abi import DecodedError
from entryway.domain.entry_points import EntryPointVersion
from entryway.domain.evm import checksum, create_address
from entryway.domain.userop import UserOperation

_VALIDATED = ("ValidationResult", "ValidationResultWithAggregation")
_NO_WINDOW = 0  # packed validation data of a side that sets no limits
# Who the simulated bundle pays (any address but zero, which v0.6 refuses: AA90).
_PAYEE = "0x000000000000000000000000000000000000dEaD"
# The refusals only an op's execution gives: the rest are validation's to judge.
_EXECUTION_REVERTS = ("AA50", "AA51")


def sender_creator_v06(entry_point: str, code: bytes) -> str:
    """The SenderCreator v0.6's constructor deployed. The npm release's code (a devnet's copy)
    holds it as its one immutable; the canonical deployment made it as its first CREATE."""
    if ENTRY_POINT_V06.runtime_matches(code):
        _, end = ENTRY_POINT_V06.immutable_ranges()[0]
        return checksum(code[end - 20 : end])
    return create_address(entry_point, 1)


def _validation_data(aggregator: int, valid_after: int, valid_until: int) -> int:
    return aggregator | (valid_until << 160) | (valid_after << 208)


def validation_result(decoded: DecodedError, *, signatures: bool = True) -> tuple[Any, ...]:
    """v0.6's ValidationResult as v0.7's `simulateValidation` returns its result; a failed
    signature refused unless `signatures` is off (estimation signs afterwards)."""
    if decoded.name not in _VALIDATED:
        raise (
            failed_op_error(decoded)
            if decoded.name == "FailedOp"
            else BundlerError(RpcErrorCode.REJECTED_BY_EP_OR_ACCOUNT, str(decoded))
        )
    return_info, sender_info, factory_info, paymaster_info = decoded.args[:4]
    pre_op_gas, prefund, sig_failed, valid_after, valid_until, context = return_info
    if sig_failed and signatures:  # one flag for both: v0.6 does not say whose signature failed
        raise BundlerError(
            RpcErrorCode.INVALID_SIGNATURE, "Invalid UserOp signature or paymaster signature"
        )
    aggregator = 1 if sig_failed else 0
    if decoded.name == "ValidationResultWithAggregation":
        aggregator = int(str(decoded.args[4][0]), 16)
    account = _validation_data(aggregator, valid_after, valid_until)
    info = (pre_op_gas, prefund, account, _NO_WINDOW, context)
    return ((info, sender_info, factory_info, paymaster_info, None),)


class SimulatorV06(Simulator):
    """`simulateValidation` of EntryPoint v0.6, answered by its revert."""

    replays = False
    checks_execution = True

    def __init__(self, eth: EthClient, entry_point: str, *, signatures: bool = True) -> None:
        self.signatures = signatures
        self.eth = eth
        self.entry_point = entry_point
        self.version = EntryPointVersion.V06
        self.simulations = ENTRY_POINT_V06
        self.override = {}
        self.replay_override = {}
        self.block = SIMULATION_BLOCK

    def validation_request(
        self, op: UserOperation, extra: dict[str, Any] | None
    ) -> tuple[str, list[Any]] | None:
        return None  # v0.6 reverts with its result: simulate_validation reads it

    async def simulate_validation(
        self, op: UserOperation, extra: dict[str, Any] | None = None
    ) -> tuple[Any, ...]:
        data = ENTRY_POINT_V06.abi.encode_call("simulateValidation", op.as_v06().as_tuple())
        try:
            await self.eth.call(
                self.entry_point, data, state_override=extra or None, block=self.block
            )
        except RpcError as exc:
            return self.answer(exc.revert_data, exc.message)
        raise BundlerError(
            RpcErrorCode.REJECTED_BY_EP_OR_ACCOUNT, "simulateValidation returned without a result"
        )

    async def check_execution(self, op: UserOperation, extra: dict[str, Any] | None) -> None:
        """v0.6 reverts a whole bundle when an op spends more than its gas limits pay for
        (AA51, "prefund below actualGasCost") or its paymaster's postOp reverts after the op's
        call reverted (AA50): `simulateValidation` cannot tell, as it stops before the
        execution. The op is run as a bundle of its own, `handleOps([op])` by eth_call, and
        refused when that reverts with one of those. `simulateHandleOp` would not do: it
        spends a few gas less than `handleOps` on the same op (a smaller call, less memory),
        enough to pass an op a bundle then reverts on. An op whose call merely reverts still
        pays for its gas and is not refused; what validation refuses is left to it."""
        data = ENTRY_POINT_V06.abi.encode_call("handleOps", [op.as_v06().as_tuple()], _PAYEE)
        try:
            await self.eth.call(
                self.entry_point, data, state_override=extra or None, block=self.block
            )
        except RpcError as exc:
            decoded = ENTRY_POINT_V06.abi.decode_error(exc.revert_data or b"")
            if decoded is not None and decoded.name == "FailedOp":
                refusal = failed_op_error(decoded)
                if refusal.message.startswith(_EXECUTION_REVERTS):
                    raise refusal from None

    async def trace_validation(
        self,
        op: UserOperation,
        tracer: str | None = None,
        extra: dict[str, Any] | None = None,
        config: dict[str, Any] | None = None,
    ) -> Any:
        data = ENTRY_POINT_V06.abi.encode_call("simulateValidation", op.as_v06().as_tuple())
        return await self._trace(data, self.override, tracer, extra, config)

    def traced_result(self, output: bytes, failed: bool) -> tuple[Any, ...]:
        return self.answer(output, "no revert")  # v0.6 always reverts, with its result

    async def trace_replay(
        self,
        calls: ValidationCalls,
        tracer: str | None = None,
        extra: dict[str, Any] | None = None,
        config: dict[str, Any] | None = None,
    ) -> Any:
        raise NotImplementedError("EntryPoint v0.6 is traced through simulateValidation")

    def answer(self, raw: bytes | None, fallback: str) -> tuple[Any, ...]:
        decoded = ENTRY_POINT_V06.abi.decode_error(raw or b"")
        if decoded is None:
            raise BundlerError(RpcErrorCode.REJECTED_BY_EP_OR_ACCOUNT, fallback)
        return validation_result(decoded, signatures=self.signatures)
