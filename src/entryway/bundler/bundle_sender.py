"""Bundles out of the mempool: chosen for an idle executor key, checked (second validation,
COD-010, the whole handleOps eth_called), sent, and followed to their receipts. Several
bundles for one block are checked and sent side by side: only the choice of their ops is one
at a time."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from entryway import contracts
from entryway.bundler.bundling import BUNDLE_OVERHEAD_GAS, select_bundle
from entryway.bundler.errors import BundlerError, RpcErrorCode
from entryway.bundler.mempool import MempoolEntry
from entryway.bundler.reverted import RevertedBundles
from entryway.bundler.states import BundlingMode, OpStatus, Tracked
from entryway.bundler.submission import (
    Attempt,
    ExecutorUnfundedError,
    PendingTransaction,
    TransactionDroppedError,
    TransactionManager,
)
from entryway.bundler.validation.simulation import (
    PENDING_BLOCK,
    eip7702_override,
    failed_op_error,
)
from entryway.chain.rpc import RpcError, TxReceipt
from entryway.domain.userop import UserOperation

if TYPE_CHECKING:
    from entryway.bundler.service import Bundler

log = logging.getLogger("entryway.bundler")
HEAD_REUSE_S = 1.0
AUTHORIZATION_GAS = 25_000  # EIP-7702 PER_EMPTY_ACCOUNT_COST, charged per authorization
EP = contracts.load("EntryPoint").abi


@dataclass(eq=False, slots=True)
class _Claim:
    """A bundle being checked and sent: its executor (reserved meanwhile) and the ops chosen
    for it at the head `block`, whose senders no other bundle may choose until it is sent."""

    executor: TransactionManager
    chosen: list[MempoolEntry]
    block: int
    now: int
    started: float

    @property
    def senders(self) -> set[str]:
        return {e.op.sender for e in self.chosen}


class BundleSender:
    def __init__(self, bundler: Bundler) -> None:
        self.bundler = bundler
        self._lock = asyncio.Lock()  # one bundle's ops chosen at a time
        self.following: set[asyncio.Task[None]] = set()  # bundles being followed to a receipt
        self._in_flight: dict[str, set[str]] = {}  # tx hash -> senders in that bundle
        self._claims: set[_Claim] = set()  # bundles chosen, being checked and sent
        # The gas of the bundles chosen while the head was this block number: together they
        # stay within the block gas limit.
        self._sent_at_head = (-1, 0)
        self.reverted = RevertedBundles(bundler)

    def idle_executor(self) -> TransactionManager | None:
        return next((e for e in self.bundler.executors if e.idle), None)

    async def _await_idle_executor(self, within_s: float = 60.0) -> None:
        """An explicit bundle request waits for a key whose last bundle has been mined."""
        deadline = time.monotonic() + within_s
        while self.idle_executor() is None and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)

    async def fill_block(self) -> str | None:
        """Auto mode: bundles with as many idle executors as the ready ops and the block's
        gas call for, each checked and sent while the next is chosen (one bundle's checks
        never hold up another's); the transaction hash of the first one sent."""
        sends: list[asyncio.Task[str | None]] = []
        try:
            while True:
                claim = await self._claim()
                if claim is None:
                    break
                sends.append(asyncio.create_task(self._check_and_send(claim, wait=False)))
                if self.idle_executor() is None or not self._others_wait():
                    break
        finally:  # a choice that failed (the node) still lets the bundles under way finish
            results = await asyncio.gather(*sends, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return next((r for r in results if isinstance(r, str)), None)

    def _busy(self) -> set[str]:
        """Senders with an op in a bundle being checked, sent, or not mined yet."""
        busy = {s for senders in self._in_flight.values() for s in senders}
        for claim in self._claims:
            busy |= claim.senders
        return busy

    def _others_wait(self) -> bool:
        busy = self._busy()
        return any(e.op.sender not in busy for e in self.bundler.mempool.entries())

    async def bundle_once(self, *, wait: bool) -> str | None:
        """Choose, check and send one bundle; with `wait`, return once it is mined."""
        if wait:
            await self._await_idle_executor()
        claim = await self._claim()
        if claim is None:
            return None
        return await self._check_and_send(claim, wait=wait)

    async def _claim(self) -> _Claim | None:
        """The next bundle's ops, chosen from the mempool for an idle executor; None when no
        executor is idle or no op can go. The executor is reserved the moment it is picked,
        before any node call, so that no other EntryPoint's bundler (whose choice is not under
        this lock) picks the same key meanwhile."""
        async with self._lock:
            executor = self.idle_executor()
            if executor is None:
                return None
            executor.reserved = True
            claim = None
            try:
                claim = await self._choose(executor)
            finally:
                if claim is None:  # nothing to send, or the choice failed: the key is free
                    executor.reserved = False
            return claim

    async def _choose(self, executor: TransactionManager) -> _Claim | None:
        """`_claim`'s choice of ops for `executor`, at the head as it is now; expired ops
        leave the mempool first."""
        block, now, base_fee = await self.bundler.head.now()
        max_age = self.bundler.config.mempool.max_age_s
        for entry, reason in self.bundler.mempool.expire(
            now=now, block=block, received_before=time.time() - max_age
        ):
            self.bundler.tracked[entry.user_op_hash] = Tracked(OpStatus.DROPPED, reason=reason)
            self.bundler.counts.ops_dropped += 1
        busy = self._busy()
        candidates = [e for e in self.bundler.mempool.entries() if e.op.sender not in busy]
        at, used = self._sent_at_head
        used = used if at == block else 0
        limits = self.bundler.config.bundle
        chosen = select_bundle(
            candidates,
            base_fee=0 if self.bundler.mode is BundlingMode.MANUAL else base_fee,
            reputation=self.bundler.reputation,
            # The transaction's gas counts the EntryPoint's overhead twice (_send).
            max_bundle_gas=limits.gas_budget(self.bundler.head.gas_limit, used)
            - BUNDLE_OVERHEAD_GAS,
            limits=limits,
        )
        if not chosen:
            if candidates:
                log.info("nothing to bundle (%d ops in the mempool)", len(candidates))
            return None
        self._sent_at_head = (block, used + self._gas([e.op for e in chosen]))
        claim = _Claim(executor, chosen, block, now, time.monotonic())
        self._claims.add(claim)
        return claim

    def _gas(self, ops: Sequence[UserOperation]) -> int:
        """A bundle transaction's gas limit for `ops`."""
        gas = sum(self.bundler.codec.bundle_gas(op) for op in ops) + BUNDLE_OVERHEAD_GAS * 2
        return gas + AUTHORIZATION_GAS * sum(op.eip7702_auth is not None for op in ops)

    async def _check_and_send(self, claim: _Claim, *, wait: bool) -> str | None:
        """Check `claim`'s ops (second validation, COD-010, the bundle's eth_call) and send
        those that pass; the transaction's hash, None when none passed. With `wait`, return
        once it is mined."""
        try:
            ops, data = await self._checked(claim)
            checks_s = time.monotonic() - claim.started
            if not ops:
                log.info(
                    "nothing to bundle: the %d ops chosen failed the checks", len(claim.chosen)
                )
                return None
            try:
                tx = await self._send(claim.executor, ops, data)
            except ExecutorUnfundedError:
                return None  # its ops wait in the mempool for a key that can pay (logged)
        finally:
            claim.executor.reserved = False
            self._claims.discard(claim)
        log.info(
            "sent a bundle of %d ops: %s (checked and sent in %.0f ms, the checks %.0f ms)",
            len(ops),
            tx.latest.tx_hash,
            (time.monotonic() - claim.started) * 1000,
            checks_s * 1000,
        )
        follow = self._follow(claim.executor, tx, ops)
        if wait:
            await follow
        else:
            task = asyncio.create_task(follow)
            self.following.add(task)
            task.add_done_callback(self.following.discard)
        return tx.latest.tx_hash

    async def _send(
        self, executor: TransactionManager, ops: list[MempoolEntry], data: bytes
    ) -> PendingTransaction:
        """Send the checked bundle of `ops` (handleOps `data`) with `executor`."""
        # The head _claim has just read (no second node call).
        _, _, base_fee = await self.bundler.head.now(max_age_s=HEAD_REUSE_S)
        priority = max(
            self.bundler.config.min_priority_fee_per_gas,
            min(e.op.max_priority_fee_per_gas for e in ops),
        )
        max_fee = max(min(e.op.max_fee_per_gas for e in ops), base_fee + priority)
        auths = [e.op.eip7702_auth.to_rpc() for e in ops if e.op.eip7702_auth is not None]
        gas = self._gas([e.op for e in ops])
        tx = await executor.send(
            self.bundler.config.entry_point, data, gas, max_fee, priority, authorizations=auths
        )
        for e in ops:
            self.bundler.mempool.remove(e.user_op_hash)
            self.bundler.tracked[e.user_op_hash] = Tracked(
                OpStatus.SUBMITTED, tx.latest.tx_hash, attempts=tx.attempts
            )
        self._in_flight[tx.latest.tx_hash] = {e.op.sender for e in ops}
        self.bundler.counts.bundles_sent += 1
        return tx

    async def _checked(self, claim: _Claim) -> tuple[list[MempoolEntry], bytes]:
        """The claimed ops that pass the checks, and their handleOps calldata (as checked by
        eth_call)."""
        chosen = claim.chosen
        # The second validation (untraced: the trace ran at admission) of every chosen op,
        # with one read of the code every op's validation used (COD-010), in one batch.
        results, changes = await self.bundler.validator.revalidate(
            [e.op for e in chosen], [e.outcome for e in chosen], now=claim.now, block=claim.block
        )
        revalidated = []
        for entry, result, changed in zip(chosen, results, changes, strict=True):
            if isinstance(result, BundlerError):
                self._drop(entry, f"second validation failed: {result.message}")
                self._blame(entry, result)
            elif isinstance(result, BaseException):
                raise result
            elif changed is not None:
                self._drop(entry, f"the code of {changed} changed since admission [COD-010]")
            else:
                revalidated.append(entry)
        return await self._drop_failing(revalidated)

    async def _drop_failing(self, ops: list[MempoolEntry]) -> tuple[list[MempoolEntry], bytes]:
        """eth_call the bundle; drop whichever op the EntryPoint names, until it passes.
        Returns the ops that passed with the calldata that passed (the bundle sends it)."""
        executor = self.bundler.executors[0].address
        while ops:
            data = self.bundler.codec.handle_ops([e.op for e in ops], self.bundler.beneficiary)
            # The bundle transaction applies EIP-7702 authorizations first; so must the check.
            delegations: dict[str, Any] = {}
            for e in ops:
                delegations.update(eip7702_override(e.op) or {})
            try:
                await self.bundler.eth.call(
                    self.bundler.config.entry_point,
                    data,
                    sender=executor,
                    block=PENDING_BLOCK,  # it lands after what the node holds
                    state_override=delegations or None,
                )
                return ops, data
            except RpcError as exc:
                decoded = EP.decode_error(exc.revert_data or b"")
                if decoded is None or decoded.name not in ("FailedOp", "FailedOpWithRevert"):
                    log.warning("bundle of %d ops reverts: %s", len(ops), exc)
                    return [], b""
                culprit = ops.pop(int(decoded.args[0]))
                error = failed_op_error(decoded)
                self._drop(culprit, error.message)
                self._blame(culprit, error, after_second_validation=True)
        return [], b""

    def _blame(
        self, entry: MempoolEntry, exc: BundlerError, *, after_second_validation: bool = False
    ) -> None:
        """Who answers for an op that passed admission but failed before bundling."""
        op = entry.op
        paymaster_failed = exc.code is RpcErrorCode.REJECTED_BY_PAYMASTER
        if op.paymaster is not None and (not paymaster_failed or entry.sender_staked):
            # EREP-015: not the paymaster's fault; EREP-030: a staked account answers for it.
            self.bundler.reputation.unseen(op.paymaster)
        elif op.paymaster is not None and after_second_validation:
            self.bundler.reputation.penalise(op.paymaster)  # GREP-040
        if not paymaster_failed and op.factory is not None and entry.factory_staked:
            self.bundler.reputation.penalise(
                op.factory
            )  # EREP-020: the factory answers for its account

    def _drop(self, entry: MempoolEntry, reason: str) -> None:
        log.info("dropped op 0x%s of %s: %s", entry.user_op_hash.hex(), entry.op.sender, reason)
        self.bundler.mempool.remove(entry.user_op_hash)
        self.bundler.tracked[entry.user_op_hash] = Tracked(OpStatus.DROPPED, reason=reason)
        self.bundler.counts.ops_dropped += 1

    async def _follow(
        self, executor: TransactionManager, tx: PendingTransaction, ops: list[MempoolEntry]
    ) -> None:
        first_hash = tx.latest.tx_hash
        try:
            receipt = await executor.wait(tx)
        except Exception as exc:  # dropped; or a bug, said, that must not end in silence
            if not isinstance(exc, TransactionDroppedError):
                log.error("following bundle %s failed", tx.latest.tx_hash, exc_info=exc)
            for e in ops:
                self.bundler.tracked[e.user_op_hash] = Tracked(
                    OpStatus.DROPPED, reason=str(exc), attempts=tx.attempts
                )
            self.bundler.counts.ops_dropped += len(ops)
            return
        finally:
            self._in_flight.pop(first_hash, None)
        if not receipt.succeeded:
            await self.reverted.blame(receipt, ops, tx.attempts)
            return
        self._record(receipt, ops, tx.attempts)

    def _record(
        self, receipt: TxReceipt, ops: list[MempoolEntry], attempts: Sequence[Attempt] = ()
    ) -> None:
        topic = EP.event_topic("UserOperationEvent")
        self.bundler.counts.bundle_gas_used += receipt.gas_used
        outcomes = {}
        for entry_log in receipt.logs:
            if entry_log.topics and entry_log.topics[0] == topic:
                outcomes[entry_log.topics[1]] = EP.decode_event(
                    "UserOperationEvent", entry_log.topics, entry_log.data
                )["success"]
        for e in ops:
            success = outcomes.get(e.user_op_hash)
            if success is None:
                self.bundler.tracked[e.user_op_hash] = Tracked(
                    OpStatus.FAILED, receipt.tx_hash, "not in bundle", attempts=attempts
                )
                continue
            status = OpStatus.INCLUDED if success else OpStatus.FAILED
            self.bundler.counts.ops_included += success
            self.bundler.counts.ops_reverted += not success
            # Its body and block kept: a reorg removing the block sends it back (reinclude).
            self.bundler.tracked[e.user_op_hash] = Tracked(
                status,
                receipt.tx_hash,
                op=e.op,
                block_number=receipt.block_number,
                attempts=attempts,
            )
            for address in e.accountable():
                self.bundler.reputation.included(address)
