"""Recovery as a service: the use cases behind /v1/recoveries and its two durable tasks.

The owner has lost the key, so nothing here is signed by an owner: guardians sign EIP-712
approvals, the service submits `startRecovery(newOwner, approvals)` as a UserOperation its own
paymaster sponsors (the account validates it by the approvals), and after the account's delay
`finalizeRecovery()` the same way (validated by the pending recovery, due at executeAfter).

Tasks are at-least-once: each step records the op it submitted before sending it, and a rerun
first asks what became of that op, so an op is never sent twice for one step, and its hold is
settled or released once its fate is known.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from eth_abi.abi import encode

from entryway.domain.evm import ZERO_ADDRESS, checksum
from entryway.domain.tasks import PermanentTaskError, RetryTaskError
from entryway.domain.wallet_ops import FINALIZE_RECOVERY, START_RECOVERY
from entryway.domain.webhooks import EventPublisher, EventType
from entryway.wallets import refusals
from entryway.wallets.ports import (
    AccountChain,
    NotASmartAccountError,
    OpFate,
    OpOutcome,
    OpRejectedError,
    RecoveryRepository,
    ScheduledTask,
    SponsoredOps,
    Submission,
)
from entryway.wallets.recovery import (
    Approval,
    Recovery,
    RecoveryState,
    SignatureFormatError,
    Verdict,
    canonical_signature,
    judge,
    signer_of,
)

START_TASK = "wallet.recovery.start"
FINALIZE_TASK = "wallet.recovery.finalize"


@dataclass(frozen=True, slots=True)
class RecoverySettings:
    receipt_wait_s: float = 30.0  # how long a task waits for its op's receipt before retrying
    poll_s: float = 1.0
    retry_s: float = 5.0
    finalize_margin_s: int = 5  # the finalize task runs this long after executeAfter


def _utc_now() -> datetime:
    return datetime.now(UTC)


def start_call(recovery: Recovery) -> bytes:
    args = encode(["address", "bytes[]"], [recovery.new_owner, recovery.sorted_approvals()])
    return START_RECOVERY + args


class RecoveryFlow:
    def __init__(
        self,
        store: RecoveryRepository,
        chain: AccountChain,
        ops: SponsoredOps,
        events: EventPublisher,
        *,
        settings: RecoverySettings | None = None,
        clock: Callable[[], datetime] = _utc_now,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.store, self.chain, self.ops, self.events = store, chain, ops, events
        self.settings = settings or RecoverySettings()
        self.clock = clock
        self.sleep = sleep

    # ------------------------------------------------------------------ requests

    async def open(
        self, project_id: str, key_id: str | None, chain_id: int, account: str, new_owner: str
    ) -> Recovery:
        """A recovery collecting approvals, bound to the account's current recovery nonce."""
        account, new_owner = checksum(account), checksum(new_owner)
        running = await self.store.open_for(project_id, chain_id, account)
        if running is not None:
            raise refusals.in_progress(running)
        try:
            onchain = await self.chain.recovery(chain_id, account)
        except NotASmartAccountError as exc:
            raise refusals.not_a_smart_account(str(exc)) from None
        if new_owner in (ZERO_ADDRESS, account, onchain.owner):
            raise refusals.invalid_new_owner(account, new_owner)
        if onchain.execute_after:
            raise refusals.pending_on_chain(account, onchain.pending_new_owner)
        guardians, threshold = await self.chain.guardians(chain_id, account)
        if threshold == 0:
            raise refusals.no_guardians(account)
        now = self.clock()
        recovery = Recovery(
            recovery_id=str(uuid.uuid4()), project_id=project_id, key_id=key_id,
            chain_id=chain_id, account=account, new_owner=new_owner,
            recovery_nonce=onchain.recovery_nonce, threshold=threshold, guardians=guardians,
            state=RecoveryState.COLLECTING, created_at=now, updated_at=now,
        )  # fmt: skip
        await self.store.create(recovery)
        return recovery

    async def approve(
        self, project_id: str, recovery_id: str, guardian: str, signature: bytes
    ) -> Recovery:
        """Add a guardian's approval once it is checked; at the threshold, queue the start."""
        recovery = await self.view(project_id, recovery_id, follow=False)
        guardian = checksum(guardian)
        if recovery.state is not RecoveryState.COLLECTING:
            raise refusals.not_collecting(recovery)
        try:
            canonical = canonical_signature(signature)
        except SignatureFormatError as exc:
            raise refusals.invalid_signature(str(exc)) from None
        if signer_of(recovery.digest, canonical) != guardian:
            raise refusals.not_the_guardians_approval(recovery, guardian)
        if not await self.chain.is_guardian(recovery.chain_id, recovery.account, guardian):
            raise refusals.not_a_guardian(recovery, guardian)
        onchain = await self.chain.recovery(recovery.chain_id, recovery.account)
        if onchain.recovery_nonce != recovery.recovery_nonce:
            await self._fail(recovery, "the account's recovery nonce moved on: approvals are void")
            raise refusals.stale(recovery, onchain.recovery_nonce)
        now = self.clock()
        await self.store.add_approval(recovery_id, Approval(guardian, canonical, now))
        recovery = await self._load(recovery_id)
        if recovery.state is RecoveryState.COLLECTING and recovery.threshold_reached:
            starting = replace(recovery, state=RecoveryState.STARTING, updated_at=now)
            task = ScheduledTask(START_TASK, "start")
            saved = await self.store.save(starting, expected=RecoveryState.COLLECTING, task=task)
            recovery = saved or await self._load(recovery_id)
        return recovery

    async def view(self, project_id: str, recovery_id: str, *, follow: bool = True) -> Recovery:
        """The project's recovery; a started one is checked against the chain first, so an
        owner's cancellation shows at once."""
        recovery = await self.store.get(recovery_id, project_id)
        if recovery is None:
            raise refusals.not_found(recovery_id)
        if follow and recovery.state is RecoveryState.STARTED:
            onchain = await self.chain.recovery(recovery.chain_id, recovery.account)
            if judge(recovery, onchain) is Verdict.CANCELLED:
                recovery = await self._cancelled(recovery)
        return recovery

    # ------------------------------------------------------------------ tasks

    async def run_start(self, recovery_id: str) -> dict[str, Any]:
        recovery = await self._load(recovery_id)
        if recovery.state is RecoveryState.STARTING:
            recovery = await self._advance_start(recovery)
        return _summary(recovery)

    async def run_finalize(self, recovery_id: str) -> dict[str, Any]:
        recovery = await self._load(recovery_id)
        sent = recovery.finalize.submission
        if sent is not None and recovery.finalize.transaction_hash is None:
            outcome = await self._wait(sent)  # settles or releases its hold, whatever the state
            if recovery.state is RecoveryState.STARTED:
                recovery = await self._after_finalize(recovery, outcome)
            elif outcome.fate is OpFate.PENDING:
                raise RetryTaskError(
                    "the finalize op is not mined yet", delay=self.settings.retry_s
                )
        if recovery.state is RecoveryState.STARTED:
            recovery = await self._advance_finalize(recovery)
        return _summary(recovery)

    async def give_up(self, recovery_id: str, reason: str) -> None:
        """A task's last attempt failed: the recovery fails rather than waiting for ever. (A
        pending recovery stays pending on chain; anyone may still finalize it when due.)"""
        recovery = await self._load(recovery_id)
        if recovery.state in (RecoveryState.STARTING, RecoveryState.STARTED):
            await self._fail(recovery, f"the service gave up after its last attempt: {reason}")

    async def _advance_start(self, recovery: Recovery) -> Recovery:
        if recovery.start.submission is not None:
            outcome = await self._wait(recovery.start.submission)
            recovery = await self._after_start(recovery, outcome)
            if recovery.state is not RecoveryState.STARTING or recovery.start.submission:
                return recovery
        onchain = await self.chain.recovery(recovery.chain_id, recovery.account)
        if onchain.recovery_nonce != recovery.recovery_nonce:
            return await self._fail(
                recovery, "the account's recovery nonce moved on: these approvals are void"
            )
        if onchain.execute_after:
            if onchain.pending_new_owner == recovery.new_owner:
                return await self._started(recovery, None)  # these approvals, sent by another
            return await self._fail(
                recovery, f"another recovery, to {onchain.pending_new_owner}, is pending"
            )
        recovery = await self._submit(recovery, "start", start_call(recovery))
        if recovery.start.submission is None or recovery.state is not RecoveryState.STARTING:
            return recovery
        recovery = await self._after_start(recovery, await self._wait(recovery.start.submission))
        if recovery.state is RecoveryState.STARTING:  # dropped: the next attempt sends anew
            raise RetryTaskError("the start op was dropped", delay=self.settings.retry_s)
        return recovery

    async def _after_start(self, recovery: Recovery, outcome: OpOutcome) -> Recovery:
        if outcome.fate is OpFate.INCLUDED:
            return await self._started(recovery, outcome.transaction_hash)
        if outcome.fate is OpFate.REVERTED:
            return await self._fail(recovery, f"startRecovery reverted: {outcome.reason}")
        return await self._unsent(recovery, outcome, "start")

    async def _advance_finalize(self, recovery: Recovery) -> Recovery:
        onchain = await self.chain.recovery(recovery.chain_id, recovery.account)
        verdict = judge(recovery, onchain)
        if verdict is Verdict.FINALIZED:
            return await self._finalized(recovery, None)  # someone else finalized it
        if verdict is Verdict.CANCELLED:
            return await self._cancelled(recovery)
        wait = onchain.execute_after - await self.chain.block_time(recovery.chain_id)
        if wait >= 0:
            raise RetryTaskError(
                f"the recovery is due in {wait + 1} s of chain time",
                delay=wait + 1 + self.settings.finalize_margin_s,
            )
        recovery = await self._submit(recovery, "finalize", FINALIZE_RECOVERY)
        sent = recovery.finalize.submission
        if sent is None or recovery.state is not RecoveryState.STARTED:
            return recovery
        recovery = await self._after_finalize(recovery, await self._wait(sent))
        if recovery.state is RecoveryState.STARTED:  # dropped: the next attempt sends anew
            raise RetryTaskError("the finalize op was dropped", delay=self.settings.retry_s)
        return recovery

    async def _after_finalize(self, recovery: Recovery, outcome: OpOutcome) -> Recovery:
        if outcome.fate is OpFate.INCLUDED:
            return await self._finalized(recovery, outcome.transaction_hash)
        if outcome.fate is OpFate.REVERTED:
            return await self._fail(recovery, f"finalizeRecovery reverted: {outcome.reason}")
        return await self._unsent(recovery, outcome, "finalize")

    async def _unsent(self, recovery: Recovery, outcome: OpOutcome, step: str) -> Recovery:
        """Still pending: try again later. Dropped: forget the op, so the step submits anew."""
        if outcome.fate is OpFate.PENDING:
            raise RetryTaskError(f"the {step} op is not mined yet", delay=self.settings.retry_s)
        cleared = replace(recovery.step(step), submission=None, user_op_hash=None)
        return await self._save(recovery.with_step(step, cleared), recovery.state)

    # ------------------------------------------------------------------ transitions

    async def _submit(self, recovery: Recovery, step: str, call_data: bytes) -> Recovery:
        """Prepare (hold), record, then send the step's op; a refusal fails the recovery."""
        try:
            sub = await self.ops.prepare(
                recovery.project_id, recovery.chain_id, recovery.account, call_data,
                purpose=f"recovery.{step}",
            )  # fmt: skip
        except OpRejectedError as exc:
            return await self._fail(recovery, f"the {step} op was refused: {exc}")
        recorded = replace(
            recovery.step(step), submission=sub.to_json(), user_op_hash=sub.user_op_hash
        )
        recovery = await self._save(recovery.with_step(step, recorded), recovery.state)
        try:
            await self.ops.send(sub)
        except OpRejectedError as exc:
            return await self._fail(recovery, f"the {step} op was refused: {exc}")
        return recovery

    async def _started(self, recovery: Recovery, tx: str | None) -> Recovery:
        onchain = await self.chain.recovery(recovery.chain_id, recovery.account)
        chain_now = await self.chain.block_time(recovery.chain_id)
        execute_after = onchain.execute_after or chain_now
        now = self.clock()
        run_at = now + timedelta(
            seconds=max(execute_after - chain_now, 0) + self.settings.finalize_margin_s
        )
        await self.events.emit(
            EventType.RECOVERY_STARTED,
            recovery.project_id,
            {
                **_event(recovery),
                "executeAfter": execute_after,
                "executableAt": datetime.fromtimestamp(execute_after, UTC).isoformat(),
                "transactionHash": tx,
                "userOpHash": recovery.start.user_op_hash,
            },
            idempotency_key=f"recovery.started:{recovery.recovery_id}",
        )
        started = replace(
            recovery,
            state=RecoveryState.STARTED,
            execute_after=execute_after,
            start=replace(recovery.start, transaction_hash=tx),
            updated_at=now,
        )
        task = ScheduledTask(FINALIZE_TASK, "finalize", run_at=run_at)
        return await self._save(started, RecoveryState.STARTING, task)

    async def _finalized(self, recovery: Recovery, tx: str | None) -> Recovery:
        await self.events.emit(
            EventType.RECOVERY_FINALIZED,
            recovery.project_id,
            {
                **_event(recovery),
                "transactionHash": tx,
                "userOpHash": recovery.finalize.user_op_hash,
            },
            idempotency_key=f"recovery.finalized:{recovery.recovery_id}",
        )
        done = replace(
            recovery,
            state=RecoveryState.FINALIZED,
            finalize=replace(recovery.finalize, transaction_hash=tx),
            updated_at=self.clock(),
        )
        return await self._save(done, recovery.state)

    async def _cancelled(self, recovery: Recovery) -> Recovery:
        tx = await self.chain.cancellation_tx(
            recovery.chain_id, recovery.account, recovery.recovery_nonce
        )
        await self.events.emit(
            EventType.RECOVERY_CANCELLED,
            recovery.project_id,
            {**_event(recovery), "transactionHash": tx},
            idempotency_key=f"recovery.cancelled:{recovery.recovery_id}",
        )
        cancelled = replace(recovery, state=RecoveryState.CANCELLED, updated_at=self.clock())
        saved = await self.store.save(cancelled, expected=recovery.state)
        return saved or await self._load(recovery.recovery_id)

    async def _fail(self, recovery: Recovery, reason: str) -> Recovery:
        failed = replace(
            recovery, state=RecoveryState.FAILED, failure_reason=reason, updated_at=self.clock()
        )
        saved = await self.store.save(failed, expected=recovery.state)
        return saved or await self._load(recovery.recovery_id)

    async def _save(
        self, recovery: Recovery, expected: RecoveryState, task: ScheduledTask | None = None
    ) -> Recovery:
        saved = await self.store.save(recovery, expected=expected, task=task)
        if saved is None:  # another worker or request moved it: run again from what it is now
            raise RetryTaskError(f"recovery {recovery.recovery_id} changed meanwhile", delay=0)
        return saved

    async def _load(self, recovery_id: str) -> Recovery:
        recovery = await self.store.get(recovery_id)
        if recovery is None:
            raise PermanentTaskError(f"no recovery {recovery_id}")
        return recovery

    async def _wait(self, submission_json: str) -> OpOutcome:
        """The op's fate, polled for up to `receipt_wait_s` while it is pending."""
        submission = Submission.from_json(submission_json)
        deadline = time.monotonic() + self.settings.receipt_wait_s
        while True:
            outcome = await self.ops.outcome(submission)
            if outcome.fate is not OpFate.PENDING or time.monotonic() >= deadline:
                return outcome
            await self.sleep(self.settings.poll_s)


def _event(recovery: Recovery) -> dict[str, Any]:
    return {
        "recoveryId": recovery.recovery_id,
        "chainId": recovery.chain_id,
        "account": recovery.account,
        "newOwner": recovery.new_owner,
    }


def _summary(recovery: Recovery) -> dict[str, Any]:
    return {"recoveryId": recovery.recovery_id, "state": recovery.state.value}
