"""eth_estimateUserOperationGas for EntryPoint v0.6, measured by v0.6's own simulation.

The verification gas is what `simulateValidation` reports validation used (its preOpGas with
no preVerificationGas), with a margin; v0.6 gives the account and the paymaster one limit. A
self-paying op is measured paying its prefund (a fee, and a balance given to the sender), as
that payment is part of its validation. The call gas is the least limit under which
`simulateHandleOp` runs the call as it runs under the largest, at a fee of one wei a gas from
a sender given a balance, so `paid` counts gas. The paymaster is left out of that run: the
call costs the same whoever pays, and its deposit does not matter.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from entryway.bundler.errors import BundlerError, RpcErrorCode
from entryway.bundler.gas.estimation import (
    CALL_MARGIN,
    FUNDED_BALANCE,
    MAX_CALL_GAS,
    MAX_VERIFICATION_GAS,
    PLACEHOLDER_FEE,
    PLACEHOLDER_PVG,
    PLACEHOLDER_WIDE_FEE,
    TOLERANCE,
    VERIFICATION_MARGIN_PERCENT,
    GasEstimate,
    GasEstimator,
)
from entryway.bundler.gas.l1fee import L1FeeQuoter
from entryway.bundler.gas.pvg import pre_verification_gas, with_full_signature
from entryway.bundler.validation.simulation import PENDING_BLOCK
from entryway.bundler.validation.simulation_v06 import ENTRY_POINT_V06, SimulatorV06
from entryway.chain.rpc import EthClient, RpcError
from entryway.domain.evm import to_hex
from entryway.domain.userop import UserOperation

_ZERO_ADDRESS = "0x" + "00" * 20


def _execution_reverted(revert_data: bytes) -> BundlerError:
    decoded = ENTRY_POINT_V06.abi.decode_error(revert_data)
    reason = f": {decoded.args[0]}" if decoded and decoded.name == "Error" else ""
    return BundlerError(
        RpcErrorCode.EXECUTION_REVERTED,
        f"UserOperation execution reverted{reason}",
        {"revertData": to_hex(revert_data)},
    )


class GasEstimatorV06(GasEstimator):
    def __init__(
        self, eth: EthClient, entry_point: str, l1_fees: L1FeeQuoter | None = None
    ) -> None:
        self.eth = eth
        self.entry_point = entry_point
        self.l1_fees = l1_fees
        self.simulator = SimulatorV06(eth, entry_point, signatures=False)

    async def estimate(
        self, op: UserOperation, state_override: dict[str, Any] | None = None
    ) -> GasEstimate:
        extra = dict(state_override or {})
        # Sponsored: zero fees, no prefund, so the paymaster's deposit does not count.
        fee = 0
        if op.paymaster is None:
            # A self-paying account sends its prefund to the EntryPoint during validation, and
            # that call is part of what verificationGasLimit must cover: measured with a fee
            # and a balance that pays it, and a fee high enough that a deposit the sender
            # already holds does not spare the probe the payment.
            funded = dict(extra.get(op.sender, {}))
            funded.setdefault("balance", hex(FUNDED_BALANCE))
            extra[op.sender] = funded
            deposit = await self._deposit(op.sender)
            fee = max(op.max_fee_per_gas, PLACEHOLDER_FEE, deposit // MAX_VERIFICATION_GAS + 1)
        probe = replace(
            op,
            verification_gas_limit=MAX_VERIFICATION_GAS,
            call_gas_limit=MAX_CALL_GAS,
            pre_verification_gas=0,
            max_fee_per_gas=fee,
            max_priority_fee_per_gas=min(op.max_priority_fee_per_gas or fee, fee),
        )
        (((used, *_), *_),) = await self.simulator.simulate_validation(probe, extra or None)
        verification = used * (100 + VERIFICATION_MARGIN_PERCENT) // 100
        # The call's gas is measured self-paid at the largest verification limit: a sponsored
        # op's limit, measured with its paymaster, need not cover the account's own prefund.
        call_gas = await self._call_gas(probe, extra)
        final = replace(
            op,
            verification_gas_limit=verification,
            call_gas_limit=call_gas,
            pre_verification_gas=op.pre_verification_gas or PLACEHOLDER_PVG,
            max_fee_per_gas=op.max_fee_per_gas or PLACEHOLDER_WIDE_FEE,
            max_priority_fee_per_gas=op.max_priority_fee_per_gas or PLACEHOLDER_WIDE_FEE,
        )
        signed_like = with_full_signature(final)
        pvg = pre_verification_gas(signed_like, used)
        if self.l1_fees is not None:
            pvg += await self._l1_gas(signed_like)
        return GasEstimate(pvg, verification, call_gas, 0, 0)

    async def _deposit(self, sender: str) -> int:
        data = ENTRY_POINT_V06.abi.encode_call("balanceOf", sender)
        raw = await self.eth.call(self.entry_point, data, block=PENDING_BLOCK)
        return int(ENTRY_POINT_V06.abi.decode_output("balanceOf", raw)[0])

    async def _call_gas(self, probe: UserOperation, extra: dict[str, Any]) -> int:
        """The least callGasLimit (within TOLERANCE) under which the call does what it does
        under the largest, plus CALL_MARGIN. The gas a call uses falls short of the limit it
        needs: a value transfer's 2,300 stipend and the 1/64 each call keeps back are handed
        out and given back. v0.6's simulateHandleOp does not say whether the call reverted,
        but a call that runs out of gas uses its whole limit: under a limit that suffices,
        the execution uses exactly what it uses under the largest."""
        if await self.eth.get_code(probe.sender):
            await self._check_call(probe, extra)
        self_paid = replace(
            probe, paymaster=None, paymaster_data=b"", max_fee_per_gas=1, max_priority_fee_per_gas=1
        )
        funded = dict(extra.get(probe.sender, {}))
        funded.setdefault("balance", hex(FUNDED_BALANCE))
        override = {**extra, probe.sender: funded}
        unbounded = await self._execution_gas(self_paid, override)

        async def suffices(limit: int) -> bool:
            op = replace(self_paid, call_gas_limit=limit)
            return await self._execution_gas(op, override) == unbounded

        high = min(unbounded + CALL_MARGIN, MAX_CALL_GAS)
        while not await suffices(high):
            if high >= MAX_CALL_GAS:
                return MAX_CALL_GAS
            high = min(high * 2, MAX_CALL_GAS)
        low = 0
        while high - low > TOLERANCE:
            mid = (low + high) // 2
            if await suffices(mid):
                high = mid
            else:
                low = mid
        return high + CALL_MARGIN

    async def _execution_gas(self, op: UserOperation, override: dict[str, Any]) -> int:
        """What simulateHandleOp says `op` (paid at one wei a gas) spends beyond validation."""
        data = ENTRY_POINT_V06.abi.encode_call(
            "simulateHandleOp", op.as_v06().as_tuple(), _ZERO_ADDRESS, b""
        )
        try:
            await self.eth.call(
                self.entry_point, data, state_override=override, block=PENDING_BLOCK
            )
        except RpcError as exc:
            decoded = ENTRY_POINT_V06.abi.decode_error(exc.revert_data or b"")
            if decoded is not None and decoded.name == "ExecutionResult":
                pre_op_gas, paid = int(decoded.args[0]), int(decoded.args[1])
                return max(paid - pre_op_gas, 0)
            self.simulator.answer(exc.revert_data, exc.message)  # FailedOp and the like
        raise BundlerError(
            RpcErrorCode.REJECTED_BY_EP_OR_ACCOUNT, "simulateHandleOp gave no execution result"
        )

    async def _check_call(self, probe: UserOperation, extra: dict[str, Any]) -> None:
        """The op's call, made as the EntryPoint makes it: v0.6's simulateHandleOp does not
        say whether it reverted. A deployed sender only (a new one has no code to call yet)."""
        try:
            await self.eth.call(
                probe.sender,
                probe.call_data,
                sender=self.entry_point,
                block=PENDING_BLOCK,
                state_override=extra or None,
            )
        except RpcError as exc:
            if exc.revert_data is None:
                raise
            raise _execution_reverted(exc.revert_data) from None
