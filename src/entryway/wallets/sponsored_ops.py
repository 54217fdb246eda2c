"""The service submitting its own sponsored UserOperations (implements
`wallets.ports.SponsoredOps` over the running service): estimated by the chain's in-process
bundler, signed by the service's paymaster signer, sent through the same bundler, and
charged to the project like any sponsored op (a hold of the estimate at signing, settled on
the receipt, released if dropped; `paymaster.costs`).

The project's sponsorship policies are not consulted: the project asked the service for this
operation through the API, and its allowlists and caps are written for its users' ops.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from entryway.bundler.errors import RpcErrorCode
from entryway.bundler.rpc_types import user_operation_json
from entryway.domain.evm import hex_to_bytes, to_hex
from entryway.domain.userop import UserOperation, user_op_hash
from entryway.errors import EntrywayError
from entryway.paymaster.costs import estimated_quote, release_sponsorship, settle_sponsorship
from entryway.paymaster.costs import sponsorship_key as hold_key
from entryway.paymaster.erc7677 import PaymasterRpc, paymaster_verification_gas
from entryway.paymaster.signer import ValidityWindow, stub_paymaster_data
from entryway.service.services import ChainRuntime, Services
from entryway.storage.ledger import Ledger, UsageContext
from entryway.wallets.account_info import ACCOUNT, EP
from entryway.wallets.ports import OpFate, OpOutcome, OpRejectedError, Submission

# Worth trying again later: the node, the bundler's reputation, a window not open yet, the
# paymaster's deposit (the operator tops it up).
_TRANSIENT = {
    RpcErrorCode.INTERNAL_ERROR,
    RpcErrorCode.SHORT_DEADLINE,
    RpcErrorCode.BANNED_OR_THROTTLED,
    RpcErrorCode.PAYMASTER_DEPOSIT_TOO_LOW,
}
FEE_TIER = "standard"  # of entryway_getUserOperationGasPrice


class SubmissionDeferredError(EntrywayError):
    """The chain or the bundler cannot take the op now; the task retries later."""


def _utc_now() -> datetime:
    return datetime.now(UTC)


class ServiceSponsoredOps:
    def __init__(self, services: Services, *, clock: Callable[[], datetime] = _utc_now) -> None:
        self.services = services
        self.clock = clock

    # ------------------------------------------------------------------ the port

    async def prepare(
        self, project_id: str, chain_id: int, sender: str, call_data: bytes, *, purpose: str
    ) -> Submission:
        chain, paymaster = self._chain(chain_id), self._paymaster(chain_id)
        pm_chain, pm_settings = paymaster.chains[chain_id], paymaster.settings
        entry_point = chain.deployment.entry_point
        (nonce,) = EP.decode_output(
            "getNonce", await chain.eth.call(entry_point, EP.encode_call("getNonce", sender, 0))
        )
        fees = (await self._rpc(chain, "entryway_getUserOperationGasPrice"))[FEE_TIER]
        now = await pm_chain.block_time()
        window = ValidityWindow(
            valid_until=now + pm_settings.validity_s,
            valid_after=max(now - pm_settings.clock_skew_s, 0),
        )
        draft = UserOperation(
            sender=sender, nonce=int(nonce), call_data=call_data, call_gas_limit=0,
            verification_gas_limit=0, pre_verification_gas=0,
            max_fee_per_gas=int(fees["maxFeePerGas"], 16),
            max_priority_fee_per_gas=int(fees["maxPriorityFeePerGas"], 16),
        )  # fmt: skip
        pm_gas = paymaster_verification_gas(draft, pm_settings.verification_gas)
        stub = draft.with_paymaster(
            pm_chain.paymaster, pm_gas, pm_settings.post_op_gas, stub_paymaster_data(window)
        )
        estimate = await self._rpc(
            chain, "eth_estimateUserOperationGas", user_operation_json(stub), entry_point
        )
        op = replace(
            stub,
            call_gas_limit=int(estimate["callGasLimit"], 16),
            verification_gas_limit=int(estimate["verificationGasLimit"], 16),
            pre_verification_gas=int(estimate["preVerificationGas"], 16),
            paymaster_verification_gas_limit=max(
                pm_gas, int(estimate.get("paymasterVerificationGasLimit", "0x0"), 16)
            ),
        )
        await self._ledger().hold(
            project_id, hold_key(chain_id, op), estimated_quote(self.services.prices, chain_id, op),
            self.clock(), key_id=None, endpoint=f"wallets:{purpose}", chain_id=chain_id,
            subject=sender, policy_id=None,
        )  # fmt: skip
        signed = paymaster.signer.sponsor(
            op, chain_id=chain_id, paymaster=pm_chain.paymaster, window=window,
            verification_gas=op.paymaster_verification_gas_limit,
            post_op_gas=op.paymaster_post_op_gas_limit,
        )  # fmt: skip
        op_hash = to_hex(user_op_hash(signed, entry_point, chain_id))
        return Submission(project_id, chain_id, op_hash, signed, window.valid_until)

    async def send(self, submission: Submission) -> None:
        chain = self._chain(submission.chain_id)
        op, entry_point = submission.op, chain.deployment.entry_point
        try:
            await self._rpc(chain, "eth_sendUserOperation", user_operation_json(op), entry_point)
        except OpRejectedError:
            await self._release(submission)
            raise
        # Recorded like an op the project sent itself (relaying a sponsored op is free), so
        # /op-status answers the project about it.
        quote = self.services.prices.relayed_user_operation(
            calls=1, calldata_bytes=len(op.call_data), sponsored=True
        )
        context = UsageContext(None, "wallets:eth_sendUserOperation", chain.chain_id, op.sender)
        await self._ledger().record_usage(
            submission.project_id,
            f"userop:{chain.chain_id}:{submission.user_op_hash.lower()}",
            quote.operation.value,
            quote.credits,
            self.clock(),
            context,
            quote=quote,
        )

    async def outcome(self, submission: Submission) -> OpOutcome:
        chain = self._chain(submission.chain_id)
        receipt = await self._rpc(chain, "eth_getUserOperationReceipt", submission.user_op_hash)
        if receipt is not None:
            await settle_sponsorship(
                self._ledger(), self.services.prices, project_id=submission.project_id,
                chain_id=submission.chain_id, op=submission.op,
                actual_gas_cost_wei=int(receipt["actualGasCost"], 16), at=self.clock(),
            )  # fmt: skip
            fate = OpFate.INCLUDED if receipt["success"] else OpFate.REVERTED
            tx = str(receipt["receipt"]["transactionHash"])
            return OpOutcome(fate, tx, receipt.get("reason"))
        status = await self._rpc(chain, "entryway_getUserOperationStatus", submission.user_op_hash)
        if status.get("status") not in ("not_found", "dropped"):
            # pending, submitted; or mined since the receipt was asked for: ask again later
            return OpOutcome(OpFate.PENDING, status.get("transactionHash"))
        await self._release(submission)  # never sent, dropped, or mined then reorged away
        return OpOutcome(OpFate.DROPPED, None, status.get("reason") or status.get("status"))

    # ------------------------------------------------------------------ helpers

    def _chain(self, chain_id: int) -> ChainRuntime:
        chain = self.services.chains.get(chain_id)
        if chain is None:
            raise SubmissionDeferredError(f"this service has no RPC endpoint for chain {chain_id}")
        return chain

    def _paymaster(self, chain_id: int) -> PaymasterRpc:
        paymaster = self.services.paymaster
        if paymaster is None or chain_id not in paymaster.chains:
            raise OpRejectedError(f"the service's paymaster does not serve chain {chain_id}")
        return paymaster

    def _ledger(self) -> Ledger:
        return self.services.store.ledger

    async def _release(self, submission: Submission) -> None:
        await release_sponsorship(
            self._ledger(), project_id=submission.project_id, chain_id=submission.chain_id,
            op=submission.op, at=self.clock(),
        )  # fmt: skip

    @staticmethod
    async def _rpc(chain: ChainRuntime, method: str, *params: Any) -> Any:
        answer = await chain.rpc.dispatch(
            {"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)}
        )
        assert answer is not None  # a request with an id always gets an answer
        error = answer.get("error")
        if error is None:
            return answer["result"]
        message = f"{method}: {error.get('message')}{_revert(error)} (code {error.get('code')})"
        if error.get("code") in _TRANSIENT:
            raise SubmissionDeferredError(message)
        raise OpRejectedError(message)


def _revert(error: dict[str, Any]) -> str:
    """The account's revert reason, when an estimate's execution reverted with one."""
    data = error.get("data")
    raw = data.get("revertData") if isinstance(data, dict) else None
    if not isinstance(raw, str):
        return ""
    try:
        decoded = ACCOUNT.decode_error(hex_to_bytes(raw))
    except ValueError:
        return ""
    return "" if decoded is None else f": {decoded}"
