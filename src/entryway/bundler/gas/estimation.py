"""eth_estimateUserOperationGas: limits found by simulation, not guessed.

Verification limits are bisected with `simulateValidation` (each probe is one cheap
eth_call); the call gas is found inside one eth_call by EntrywaySimulations, which
bisects over executions whose effects it rolls back.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from entryway.bundler.errors import BundlerError, RpcErrorCode
from entryway.bundler.gas.l1fee import L1FeeQuoter
from entryway.bundler.gas.pvg import pre_verification_gas, with_full_signature
from entryway.bundler.validation.simulation import (
    PENDING_BLOCK,
    eip7702_override,
    revert_error,
    simulation_artifacts,
)
from entryway.chain.rpc import EthClient, RpcError
from entryway.domain.entry_points import EntryPointVersion, version_at
from entryway.domain.evm import to_hex
from entryway.domain.userop import UserOperation

MAX_VERIFICATION_GAS = 10_000_000
# Estimation runs in one eth_call under the node's gas cap (often the block gas limit): the
# first probe and the bisection together must fit, so the ceiling stays well below it.
MAX_CALL_GAS = 10_000_000
TOLERANCE = 1_000
# Headroom over the least limit that passed: signatures and storage vary a little op to op.
VERIFICATION_MARGIN_PERCENT = 10
CALL_MARGIN = 2_000
CEILING_SLACK = 50_000
# Fee a self-paying op is simulated with when it gives none, and the balance that pays it.
PLACEHOLDER_FEE = 10**9
FUNDED_BALANCE = 2**128
# Unset fields priced at their widest plausible non-zero form (3 and 8 bytes).
PLACEHOLDER_PVG = 0xFFFFFF
PLACEHOLDER_WIDE_FEE = 2**64 - 1


@dataclass(frozen=True, slots=True)
class GasEstimate:
    pre_verification_gas: int
    verification_gas_limit: int
    call_gas_limit: int
    paymaster_verification_gas_limit: int
    paymaster_post_op_gas_limit: int

    def to_json(self) -> dict[str, str]:
        out = {
            "preVerificationGas": hex(self.pre_verification_gas),
            "verificationGasLimit": hex(self.verification_gas_limit),
            "callGasLimit": hex(self.call_gas_limit),
        }
        if self.paymaster_verification_gas_limit:
            out["paymasterVerificationGasLimit"] = hex(self.paymaster_verification_gas_limit)
            out["paymasterPostOpGasLimit"] = hex(self.paymaster_post_op_gas_limit)
        return out


class GasEstimator:
    def __init__(
        self,
        eth: EthClient,
        entry_point: str,
        l1_fees: L1FeeQuoter | None = None,
        version: EntryPointVersion | None = None,
    ) -> None:
        self.eth = eth
        self.entry_point = entry_point
        self.l1_fees = l1_fees
        # EntrywaySimulations built on the EntryPoint release's own simulation code.
        self.estimator = simulation_artifacts(version or version_at(entry_point))[1]

    def _override(self, extra: dict[str, Any] | None) -> dict[str, Any]:
        override: dict[str, Any] = dict(extra or {})
        mine = dict(override.get(self.entry_point, {}))
        mine["code"] = to_hex(self.estimator.deployed_bytecode)
        override[self.entry_point] = mine
        return override

    async def _call(self, fn: str, *args: Any, override: dict[str, Any]) -> tuple[Any, ...]:
        data = self.estimator.abi.encode_call(fn, *args)
        try:
            raw = await self.eth.call(
                self.entry_point, data, state_override=override, block=PENDING_BLOCK
            )
        except RpcError as exc:
            raise revert_error(exc.revert_data, exc.message) from None
        return self.estimator.abi.decode_output(fn, raw)

    async def _l1_gas(self, op: UserOperation) -> int:
        """The L1 fee in gas; an estimate with no fee set is priced at the current base fee."""
        assert self.l1_fees is not None
        if op.max_fee_per_gas == 0:
            block = await self.eth.get_block("latest")
            op = replace(op, max_fee_per_gas=max(int(block.get("baseFeePerGas", "0x1"), 16), 1))
        return await self.l1_fees.gas(op)

    async def _validates(self, op: UserOperation, override: dict[str, Any]) -> bool:
        try:
            await self._call("simulateValidation", op.packed(), override=override)
        except BundlerError as exc:
            if exc.code in (
                RpcErrorCode.REJECTED_BY_EP_OR_ACCOUNT,
                RpcErrorCode.REJECTED_BY_PAYMASTER,
            ):
                return False
            raise
        return True

    async def _ceiling(
        self, op: UserOperation, paymaster: bool, override: dict[str, Any], used: int
    ) -> int:
        """A limit known to validate, near what validation used (each phase uses no more than
        all of it, plus the 1/64 a call must leave behind): one call instead of the top
        halvings of a search from MAX_VERIFICATION_GAS."""
        guess = used * 64 // 63 + CEILING_SLACK
        if guess < MAX_VERIFICATION_GAS:
            probe = (
                replace(op, paymaster_verification_gas_limit=guess)
                if paymaster
                else replace(op, verification_gas_limit=guess)
            )
            if await self._validates(probe, override):
                return guess
        return MAX_VERIFICATION_GAS

    async def _least(
        self, op: UserOperation, paymaster: bool, override: dict[str, Any], high: int
    ) -> int:
        """The least verification (or paymaster verification) gas limit that validates."""
        low = 0
        while high - low > TOLERANCE:
            mid = (low + high) // 2
            probe = (
                replace(op, paymaster_verification_gas_limit=mid)
                if paymaster
                else replace(op, verification_gas_limit=mid)
            )
            if await self._validates(probe, override):
                high = mid
            else:
                low = mid
        return high

    async def estimate(
        self, op: UserOperation, state_override: dict[str, Any] | None = None
    ) -> GasEstimate:
        extra = {**(eip7702_override(op) or {}), **(state_override or {})}
        if op.paymaster is None:
            # A self-paying account sends its prefund to the EntryPoint during validation (and
            # may create its deposit): measure that path with real fees and a balance that
            # covers them, so the estimate does not depend on the sender's funds.
            funded = dict(extra.get(op.sender, {}))
            funded.setdefault("balance", hex(FUNDED_BALANCE))
            extra[op.sender] = funded
            override = self._override(extra)
            # A deposit the sender already holds could cover a probe's prefund (no call gas,
            # a low fee) and spare it the payment that the op as sent makes: priced so that
            # any probe over the search's tolerance outgrows the deposit.
            (deposit,) = await self._call("balanceOf", op.sender, override=override)
            max_fee = max(op.max_fee_per_gas, PLACEHOLDER_FEE, deposit // TOLERANCE + 1)
            tip = min(op.max_priority_fee_per_gas or PLACEHOLDER_FEE, max_fee)
        else:
            # Zero fees: the estimate must not depend on the paymaster's deposit.
            max_fee = tip = 0
            override = self._override(extra)
        probe = replace(
            op,
            max_fee_per_gas=max_fee,
            max_priority_fee_per_gas=tip,
            verification_gas_limit=MAX_VERIFICATION_GAS,
            call_gas_limit=0,
            paymaster_verification_gas_limit=MAX_VERIFICATION_GAS if op.paymaster else 0,
        )
        probe = replace(probe, pre_verification_gas=0)
        # Surfaces the real reason (signature length, AA2x, paymaster rejection) at once, and
        # measures the whole validation: a ceiling each search can start under.
        (((used, *_), *_),) = await self._call(
            "simulateValidation", probe.packed(), override=override
        )
        ceiling = await self._ceiling(probe, False, override, used)
        verification = await self._least(probe, False, override, ceiling)
        verification = verification * (100 + VERIFICATION_MARGIN_PERCENT) // 100
        probe = replace(probe, verification_gas_limit=verification)
        pm_verification = 0
        if op.paymaster is not None:
            ceiling = await self._ceiling(probe, True, override, used)
            pm_verification = await self._least(probe, True, override, ceiling)
            pm_verification = pm_verification * (100 + VERIFICATION_MARGIN_PERCENT) // 100
            probe = replace(probe, paymaster_verification_gas_limit=pm_verification)
        # A caller's own callGasLimit is the ceiling to search under, when it gives one.
        ceiling = op.call_gas_limit or MAX_CALL_GAS
        call_gas, success, result = await self._call(
            "estimateCallGas", probe.packed(), ceiling, TOLERANCE, override=override
        )
        if not success:
            decoded = self.estimator.abi.decode_error(result)
            reason = f": {decoded.args[0]}" if decoded and decoded.name == "Error" else ""
            raise BundlerError(
                RpcErrorCode.EXECUTION_REVERTED,
                f"UserOperation execution reverted{reason}",
                {"revertData": to_hex(result)},
            )
        (((pre_op_gas, *_), *_),) = await self._call(
            "simulateValidation", probe.packed(), override=override
        )
        # Priced as it will be sent: fields still unset (0) count as the widest they may be,
        # since every non-zero calldata byte costs more than a zero one.
        final = replace(
            op,
            verification_gas_limit=verification,
            call_gas_limit=call_gas + CALL_MARGIN,
            pre_verification_gas=op.pre_verification_gas or PLACEHOLDER_PVG,
            max_fee_per_gas=op.max_fee_per_gas or PLACEHOLDER_WIDE_FEE,
            max_priority_fee_per_gas=op.max_priority_fee_per_gas or PLACEHOLDER_WIDE_FEE,
            paymaster_verification_gas_limit=pm_verification or op.paymaster_verification_gas_limit,
        )
        signed_like = with_full_signature(final)
        pvg = pre_verification_gas(signed_like, pre_op_gas)
        if self.l1_fees is not None:
            pvg += await self._l1_gas(signed_like)
        return GasEstimate(
            pre_verification_gas=pvg,
            verification_gas_limit=verification,
            call_gas_limit=call_gas + CALL_MARGIN,
            paymaster_verification_gas_limit=pm_verification,
            paymaster_post_op_gas_limit=op.paymaster_post_op_gas_limit if op.paymaster else 0,
        )
