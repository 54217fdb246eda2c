"""The service submitting its own sponsored UserOperations (implements
`wallets.ports.SponsoredOps`): estimated by the chain's bundler port (`BundlerPort`), signed
by the service's paymaster signer, sent through the same port (to the durable intake), and
charged to the project like any sponsored op (a hold of the estimate at signing; once
accepted, the relay charge, the hold's link to the op and its settlement task in one
transaction, before the op enters the mempool; settled on the receipt, released if dropped;
`paymaster.costs`).

The project's sponsorship policies are not consulted: the project asked the service for this
operation through the API, and its allowlists and caps are written for its users' ops.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from entryway.bundler.errors import BundlerError, RpcErrorCode
from entryway.bundler.port import BundlerPort, OpStatus
from entryway.chain.rpc import EthClient
from entryway.domain.evm import hex_to_bytes, to_hex
from entryway.domain.pricebook import PriceBook
from entryway.domain.userop import UserOperation, user_op_hash
from entryway.errors import EntrywayError
from entryway.paymaster.costs import estimated_quote, release_sponsorship, settle_sponsorship
from entryway.paymaster.costs import sponsorship_key as hold_key
from entryway.paymaster.erc7677 import PaymasterRpc, paymaster_verification_gas
from entryway.paymaster.ports import SponsorshipLedger
from entryway.paymaster.relay_accounting import RelayAccounting
from entryway.paymaster.signer import stub_paymaster_data
from entryway.wallets.account_info import ACCOUNT, EP
from entryway.wallets.ports import OpFate, OpOutcome, OpRejectedError, Submission

T = TypeVar("T")
# Worth trying again later: the node, the bundler's reputation, an unstaked entity's room in
# the mempool (its pending ops drain), a window not open yet, the paymaster's deposit (the
# operator tops it up).
_TRANSIENT = {
    RpcErrorCode.INTERNAL_ERROR,
    RpcErrorCode.SHORT_DEADLINE,
    RpcErrorCode.BANNED_OR_THROTTLED,
    RpcErrorCode.STAKE_TOO_LOW,
    RpcErrorCode.PAYMASTER_DEPOSIT_TOO_LOW,
}
FEE_TIER = "standard"  # of entryway_getUserOperationGasPrice


class SubmissionDeferredError(EntrywayError):
    """The chain or the bundler cannot take the op now; the task retries later."""


@dataclass(frozen=True, slots=True)
class SponsoringChain:
    """What submitting on one chain takes: its bundler and a node to read nonces from."""

    bundler: BundlerPort
    eth: EthClient


def _utc_now() -> datetime:
    return datetime.now(UTC)


class ServiceSponsoredOps:
    def __init__(
        self,
        chains: Mapping[int, SponsoringChain],
        paymaster: PaymasterRpc | None,
        ledger: SponsorshipLedger,
        accounting: RelayAccounting,
        prices: PriceBook,
        *,
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        self.chains = chains
        self.paymaster = paymaster
        self.ledger = ledger
        self.accounting = accounting
        self.prices = prices
        self.clock = clock

    # ------------------------------------------------------------------ the port

    async def prepare(
        self, project_id: str, chain_id: int, sender: str, call_data: bytes, *, purpose: str
    ) -> Submission:
        chain, paymaster = self._chain(chain_id), self._paymaster(chain_id)
        pm_chain, pm_settings = paymaster.chains[chain_id], paymaster.settings
        entry_point = chain.bundler.entry_point
        (nonce,) = EP.decode_output(
            "getNonce", await chain.eth.call(entry_point, EP.encode_call("getNonce", sender, 0))
        )
        fees = await _bundler(
            "entryway_getUserOperationGasPrice", chain.bundler.gas_price(FEE_TIER)
        )
        window = pm_settings.window(await paymaster.signing_time(pm_chain))
        draft = UserOperation(
            sender=sender, nonce=int(nonce), call_data=call_data, call_gas_limit=0,
            verification_gas_limit=0, pre_verification_gas=0,
            max_fee_per_gas=fees.max_fee_per_gas,
            max_priority_fee_per_gas=fees.max_priority_fee_per_gas,
        )  # fmt: skip
        pm_gas = paymaster_verification_gas(draft, pm_settings.verification_gas)
        stub = draft.with_paymaster(
            pm_chain.paymaster, pm_gas, pm_settings.post_op_gas, stub_paymaster_data(window)
        )
        estimate = await _bundler("eth_estimateUserOperationGas", chain.bundler.estimate(stub))
        op = replace(
            stub,
            call_gas_limit=estimate.call_gas_limit,
            verification_gas_limit=estimate.verification_gas_limit,
            pre_verification_gas=estimate.pre_verification_gas,
            paymaster_verification_gas_limit=max(pm_gas, estimate.paymaster_verification_gas_limit),
        )
        await self.ledger.hold(
            project_id, hold_key(chain_id, op), estimated_quote(self.prices, chain_id, op),
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
        paymaster = self._paymaster(submission.chain_id).chains[submission.chain_id].paymaster

        async def account(op: UserOperation, op_hash: bytes) -> None:
            # Recorded like an op the project sent itself (relaying a sponsored op is free),
            # so /op-status answers the project about it; before it enters the mempool.
            await self.accounting.record_accepted_op(
                project_id=submission.project_id,
                chain_id=submission.chain_id,
                op=op,
                user_op_hash=to_hex(op_hash),
                service_paymaster=paymaster,
                endpoint="wallets:eth_sendUserOperation",
            )

        try:
            await _bundler(
                "eth_sendUserOperation",
                chain.bundler.send(submission.op, before_mempool=account),
            )
        except OpRejectedError:
            await self._release(submission)
            raise

    async def outcome(self, submission: Submission) -> OpOutcome:
        chain = self._chain(submission.chain_id)
        receipt = await _bundler(
            "eth_getUserOperationReceipt", chain.bundler.receipt(submission.user_op_hash)
        )
        if receipt is not None:
            await settle_sponsorship(
                self.ledger, self.prices, project_id=submission.project_id,
                chain_id=submission.chain_id, op=submission.op,
                actual_gas_cost_wei=receipt.actual_gas_cost, at=self.clock(),
                counted=self.accounting.counted, l1_fee_wei=receipt.l1_fee,
            )  # fmt: skip
            fate = OpFate.INCLUDED if receipt.success else OpFate.REVERTED
            return OpOutcome(fate, receipt.transaction_hash, receipt.reason)
        status = await _bundler(
            "entryway_getUserOperationStatus", chain.bundler.status(submission.user_op_hash)
        )
        if status.status not in (OpStatus.NOT_FOUND, OpStatus.DROPPED):
            # pending, submitted; or mined since the receipt was asked for: ask again later
            return OpOutcome(OpFate.PENDING, status.transaction_hash)
        await self._release(submission)  # never sent, dropped, or mined then reorged away
        return OpOutcome(OpFate.DROPPED, None, status.reason or status.status.value)

    # ------------------------------------------------------------------ helpers

    def _chain(self, chain_id: int) -> SponsoringChain:
        chain = self.chains.get(chain_id)
        if chain is None:
            raise SubmissionDeferredError(f"this service has no RPC endpoint for chain {chain_id}")
        return chain

    def _paymaster(self, chain_id: int) -> PaymasterRpc:
        paymaster = self.paymaster
        if paymaster is None or chain_id not in paymaster.chains:
            raise OpRejectedError(f"the service's paymaster does not serve chain {chain_id}")
        return paymaster

    async def _release(self, submission: Submission) -> None:
        await release_sponsorship(
            self.ledger, project_id=submission.project_id, chain_id=submission.chain_id,
            op=submission.op, at=self.clock(),
        )  # fmt: skip


async def _bundler(what: str, call: Awaitable[T]) -> T:
    """A bundler refusal as the recovery task needs it: retry later, or give up."""
    try:
        return await call
    except BundlerError as exc:
        message = f"{what}: {exc.message}{_revert(exc.data)} (code {int(exc.code)})"
        if exc.code in _TRANSIENT:
            raise SubmissionDeferredError(message) from exc
        raise OpRejectedError(message) from exc


def _revert(data: Any) -> str:
    """The account's revert reason, when an estimate's execution reverted with one."""
    raw = data.get("revertData") if isinstance(data, dict) else None
    if not isinstance(raw, str):
        return ""
    try:
        decoded = ACCOUNT.decode_error(hex_to_bytes(raw))
    except ValueError:
        return ""
    return "" if decoded is None else f": {decoded}"
