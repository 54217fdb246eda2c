"""Bundles out of the mempool: built, checked (second validation, COD-010, the whole
handleOps eth_called), sent with an idle executor key, and followed to their receipts."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from entryway import contracts
from entryway.bundler.bundling import BUNDLE_OVERHEAD_GAS, select_bundle
from entryway.bundler.errors import BundlerError, RpcErrorCode
from entryway.bundler.mempool import MempoolEntry
from entryway.bundler.states import BundlingMode, OpStatus, Tracked
from entryway.bundler.submission import (
    Attempt,
    PendingTransaction,
    TransactionDroppedError,
    TransactionManager,
)
from entryway.bundler.validation.simulation import (
    SIMULATION_BLOCK,
    eip7702_override,
    failed_op_error,
)
from entryway.chain.rpc import RpcError, TxReceipt

if TYPE_CHECKING:
    from entryway.bundler.service import Bundler

log = logging.getLogger("entryway.bundler")
HEAD_REUSE_S = 1.0
AUTHORIZATION_GAS = 25_000  # EIP-7702 PER_EMPTY_ACCOUNT_COST, charged per authorization
EP = contracts.load("EntryPoint").abi


class BundleSender:
    def __init__(self, bundler: Bundler) -> None:
        self.bundler = bundler
        self._lock = asyncio.Lock()
        self.following: set[asyncio.Task[None]] = set()  # bundles being followed to a receipt
        self._in_flight: dict[str, set[str]] = {}  # tx hash -> senders in that bundle
        # The gas of the bundles sent while the head was this block number: together they
        # stay within the block gas limit.
        self._sent_at_head = (-1, 0)
        # How long the last bundle's checks took (second validation, COD-010, eth_call):
        # logged with each bundle, since it is what a bundle waits on under load.
        self.last_checks_s = 0.0

    def idle_executor(self) -> TransactionManager | None:
        return next((e for e in self.bundler.executors if e.idle), None)

    async def _await_idle_executor(self, within_s: float = 60.0) -> None:
        """An explicit bundle request waits for a key whose last bundle has been mined."""
        deadline = time.monotonic() + within_s
        while self.idle_executor() is None and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)

    async def fill_block(self) -> str | None:
        """Auto mode: a bundle, then another with the next idle executor while ops that
        could go wait and the block has room; the first bundle's transaction hash."""
        first = await self.bundle_once(wait=False)
        sent = first
        while sent is not None and self.idle_executor() is not None and self._others_wait():
            sent = await self.bundle_once(wait=False)
        return first

    def _others_wait(self) -> bool:
        busy = {s for senders in self._in_flight.values() for s in senders}
        return any(e.op.sender not in busy for e in self.bundler.mempool.entries())

    async def bundle_once(self, *, wait: bool) -> str | None:
        """Build, check and send one bundle; with `wait`, return once it is mined."""
        if wait:
            await self._await_idle_executor()
        async with self._lock:
            started = time.monotonic()
            executor = self.idle_executor()
            if executor is None:
                return None
            executor.reserved = True  # no other EntryPoint's bundler takes it meanwhile
            try:
                sent = await self._send_with(executor)
            finally:
                executor.reserved = False
            if sent is None:
                return None
            tx, ops = sent
        log.info(
            "sent a bundle of %d ops: %s (checked and sent in %.0f ms, the checks %.0f ms)",
            len(ops),
            tx.latest.tx_hash,
            (time.monotonic() - started) * 1000,
            self.last_checks_s * 1000,
        )
        follow = self._follow(executor, tx, ops)
        if wait:
            await follow
        else:
            task = asyncio.create_task(follow)
            self.following.add(task)
            task.add_done_callback(self.following.discard)
        return tx.latest.tx_hash

    async def _send_with(
        self, executor: TransactionManager
    ) -> tuple[PendingTransaction, list[MempoolEntry]] | None:
        """Build, check and send a bundle with `executor`; None when there is nothing to send."""
        checking = time.monotonic()
        ops, data = await self._checked_bundle()
        self.last_checks_s = time.monotonic() - checking
        if not ops:
            log.info("nothing to bundle (%d ops in the mempool)", len(self.bundler.mempool))
            return None
        gas = sum(self.bundler.codec.bundle_gas(e.op) for e in ops) + BUNDLE_OVERHEAD_GAS * 2
        # The head _checked_bundle has just read (no second node call).
        block, _, base_fee = await self.bundler.head.now(max_age_s=HEAD_REUSE_S)
        priority = max(
            self.bundler.config.min_priority_fee_per_gas,
            min(e.op.max_priority_fee_per_gas for e in ops),
        )
        max_fee = max(min(e.op.max_fee_per_gas for e in ops), base_fee + priority)
        auths = [e.op.eip7702_auth.to_rpc() for e in ops if e.op.eip7702_auth is not None]
        gas += AUTHORIZATION_GAS * len(auths)
        tx = await executor.send(
            self.bundler.config.entry_point, data, gas, max_fee, priority, authorizations=auths
        )
        for e in ops:
            self.bundler.mempool.remove(e.user_op_hash)
            self.bundler.tracked[e.user_op_hash] = Tracked(
                OpStatus.SUBMITTED, tx.latest.tx_hash, attempts=tx.attempts
            )
        self._in_flight[tx.latest.tx_hash] = {e.op.sender for e in ops}
        at, used = self._sent_at_head
        self._sent_at_head = (block, (used if at == block else 0) + gas)
        self.bundler.counts.bundles_sent += 1
        return tx, ops

    async def _checked_bundle(self) -> tuple[list[MempoolEntry], bytes]:
        """The ops to bundle now, and their handleOps calldata (as checked by eth_call)."""
        block, now, base_fee = await self.bundler.head.now()
        max_age = self.bundler.config.mempool.max_age_s
        for entry, reason in self.bundler.mempool.expire(
            now=now, block=block, received_before=time.time() - max_age
        ):
            self.bundler.tracked[entry.user_op_hash] = Tracked(OpStatus.DROPPED, reason=reason)
            self.bundler.counts.ops_dropped += 1
        busy = {s for senders in self._in_flight.values() for s in senders}
        candidates = [e for e in self.bundler.mempool.entries() if e.op.sender not in busy]
        at, used = self._sent_at_head
        limits = self.bundler.config.bundle
        budget = limits.gas_budget(self.bundler.head.gas_limit, used if at == block else 0)
        chosen = select_bundle(
            candidates,
            base_fee=0 if self.bundler.mode is BundlingMode.MANUAL else base_fee,
            reputation=self.bundler.reputation,
            # The transaction's gas counts the EntryPoint's overhead twice (_send_with).
            max_bundle_gas=budget - BUNDLE_OVERHEAD_GAS,
            limits=limits,
        )
        # The second validation (untraced: the trace ran at admission) of every chosen op,
        # with one read of the code every op's validation used (COD-010), in one batch.
        results, changes = await self.bundler.validator.revalidate(
            [e.op for e in chosen], [e.outcome for e in chosen], now=now, block=block
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
                    block=SIMULATION_BLOCK,
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
        except TransactionDroppedError as exc:
            for e in ops:
                self.bundler.tracked[e.user_op_hash] = Tracked(
                    OpStatus.DROPPED, reason=str(exc), attempts=tx.attempts
                )
            self.bundler.counts.ops_dropped += len(ops)
            return
        finally:
            self._in_flight.pop(first_hash, None)
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
