"""The bundler's use cases: accept ops, bundle them, follow them on chain."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from entryway import contracts
from entryway.bundler.blockclock import BlockClock
from entryway.bundler.bundling import BUNDLE_OVERHEAD_GAS, BundleLimits, select_bundle
from entryway.bundler.errors import BundlerError, RpcErrorCode, invalid_params
from entryway.bundler.gas.l1fee import L1FeeQuoter
from entryway.bundler.gas.pvg import minimum_pre_verification_gas, pre_verification_gas
from entryway.bundler.mempool import Mempool, MempoolEntry, MempoolLimits
from entryway.bundler.receipts import ReceiptReader
from entryway.bundler.reputation import Reputation, ReputationStatus
from entryway.bundler.schedule import BundleSchedule
from entryway.bundler.submission import TransactionDroppedError, TransactionManager
from entryway.bundler.validation.outcome import ValidationData, ValidationOutcome
from entryway.bundler.validation.rules import RuleSettings, StakeInfo
from entryway.bundler.validation.sanity import SanityLimits, check_sanity
from entryway.bundler.validation.simulation import (
    SIMULATION_BLOCK,
    Validator,
    eip7702_override,
    failed_op_error,
)
from entryway.chain.rpc import EthClient, RpcError, TxReceipt
from entryway.domain.eip7702 import delegate_of
from entryway.domain.userop import UserOperation, user_op_hash

log = logging.getLogger("entryway.bundler")
HEAD_TTL_S = 0.1  # how stale a head read a newly sent op may be judged against
AUTO_TICK_S = 0.05  # how often auto mode asks the schedule
SEED_BLOCKS = 8  # recent blocks whose timestamps may give the block interval at start
IDLE_HEAD_POLL_S = 2.0  # head reads when no op came for ACTIVE_S (hosted RPCs bill per call)
ACTIVE_S = 30.0
AUTHORIZATION_GAS = 25_000  # EIP-7702 PER_EMPTY_ACCOUNT_COST, charged per authorization
EP = contracts.load("EntryPoint").abi


class BundlingMode(StrEnum):
    AUTO = "auto"
    MANUAL = "manual"


class OpStatus(StrEnum):
    NOT_FOUND = "not_found"
    PENDING = "pending"
    SUBMITTED = "submitted"
    INCLUDED = "included"
    FAILED = "failed"
    DROPPED = "dropped"


@dataclass(frozen=True, slots=True)
class BundlerConfig:
    entry_point: str
    chain_id: int
    beneficiary: str | None = None
    mode: BundlingMode = BundlingMode.AUTO
    auto_bundle_interval_s: float = 1.0  # between bundles where blocks come irregularly
    auto_bundle_mempool_size: int = 64  # bundle at once when this many ops wait
    head_poll_s: float = 0.1  # how often the latest block number is read (auto mode)
    tracing: bool = True
    rules: RuleSettings = field(default_factory=lambda: RuleSettings(min_stake_wei=10**18))
    sanity: SanityLimits = field(default_factory=SanityLimits)
    mempool: MempoolLimits = field(default_factory=MempoolLimits)
    bundle: BundleLimits = field(default_factory=BundleLimits)
    receipt_lookback_blocks: int = 10_000
    min_priority_fee_per_gas: int = 0
    l1_fee_oracle: str | None = None  # OP-stack GasPriceOracle, on chains that post to L1


@dataclass(slots=True)
class Tracked:
    """What became of an op this bundler accepted."""

    status: OpStatus
    tx_hash: str | None = None
    reason: str | None = None
    updated_at: float = field(default_factory=time.time)


class Bundler:
    def __init__(
        self,
        eth: EthClient,
        executors: list[TransactionManager],
        validator: Validator,
        config: BundlerConfig,
    ) -> None:
        if not executors:
            raise ValueError("a bundler needs at least one executor key")
        self.eth = eth
        self.executors = executors
        self.validator = validator
        self.config = config
        self.mode = config.mode
        self.reputation = Reputation()
        self.mempool = Mempool(self.reputation, config.mempool)
        self.receipts = ReceiptReader(
            eth, config.entry_point, config.chain_id, config.receipt_lookback_blocks
        )
        self.tracked: dict[bytes, Tracked] = {}
        self.l1_fees = L1FeeQuoter(eth, config.l1_fee_oracle) if config.l1_fee_oracle else None
        self._bundle_lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._following: set[asyncio.Task[None]] = set()  # bundles being followed to a receipt
        self._in_flight: dict[str, set[str]] = {}  # tx hash -> senders in that bundle
        self._head: tuple[int, int, int] | None = None
        self._head_read_at = 0.0
        self._head_lock = asyncio.Lock()
        self.clock = BlockClock(precise_s=2.5 * config.head_poll_s)
        self._last_op_at = 0.0
        self._op_arrived = asyncio.Event()
        self.schedule = BundleSchedule(
            self.clock, config.auto_bundle_interval_s, config.head_poll_s
        )

    @property
    def beneficiary(self) -> str:
        return self.config.beneficiary or self.executors[0].address

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self._last_op_at = time.monotonic()  # watch closely at first: the clock learns the chain
        self._tasks.append(asyncio.create_task(self._auto_bundle_loop(), name="auto-bundle"))
        self._tasks.append(asyncio.create_task(self._watch_head_loop(), name="head-watch"))
        self._tasks.append(asyncio.create_task(self._decay_loop(), name="reputation-decay"))

    async def stop(self) -> None:
        self._tasks.extend(self._following)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    # ------------------------------------------------------------------ accepting ops

    async def op_hash(self, op: UserOperation) -> bytes:
        delegate = None
        if op.is_eip7702:
            if op.eip7702_auth is not None:
                delegate = op.eip7702_auth.address
            else:
                delegate = delegate_of(await self.eth.get_code(op.sender))
            if delegate is None:
                raise BundlerError(
                    RpcErrorCode.REJECTED_BY_EP_OR_ACCOUNT,
                    f"sender {op.sender} is not an EIP-7702 account and brings no authorization",
                )
        return user_op_hash(op, self.config.entry_point, self.config.chain_id, delegate=delegate)

    async def _check_authorization(self, op: UserOperation) -> None:
        """An EIP-7702 authorization must be the sender's own, for this chain (or any chain),
        at the sender's current nonce, or the bundle would carry it in vain."""
        auth = op.eip7702_auth
        if auth is None:
            return
        if auth.chain_id not in (0, self.config.chain_id):
            raise invalid_params(
                f"eip7702Auth chainId {auth.chain_id} is neither 0 nor {self.config.chain_id}"
            )
        try:
            signer = auth.signer()
        except Exception:
            raise invalid_params("eip7702Auth: the signature does not recover") from None
        if signer != op.sender:
            raise invalid_params(
                f"eip7702Auth is signed by {signer}, not by the sender {op.sender}"
            )
        nonce = await self.eth.get_nonce(op.sender, "pending")
        if auth.nonce != nonce:
            raise BundlerError(
                RpcErrorCode.REJECTED_BY_EP_OR_ACCOUNT,
                f"eip7702Auth nonce {auth.nonce} is not the sender's nonce {nonce}",
            )

    def check_entry_point(self, entry_point: Any) -> None:
        if (
            not isinstance(entry_point, str)
            or entry_point.lower() != self.config.entry_point.lower()
        ):
            raise invalid_params(
                f"unsupported EntryPoint {entry_point!r}; "
                f"this bundler serves {self.config.entry_point}"
            )

    async def _chain_now(self, max_age_s: float = 0.0) -> tuple[int, int, int]:
        """(latest block number, the time the next block may carry, base fee). With
        `max_age_s`, a head read that recently is reused: ops arriving together share one
        block read (the time still follows the wall clock)."""
        async with self._head_lock:
            if self._head is None or time.monotonic() - self._head_read_at > max_age_s:
                block = await self.eth.get_block("latest")
                self._head_read_at = time.monotonic()
                self._head = (
                    int(block["number"], 16),
                    int(block["timestamp"], 16),
                    int(block.get("baseFeePerGas", "0x0"), 16),
                )
            number, timestamp, base_fee = self._head
        return number, max(timestamp, int(time.time())), base_fee

    async def send(self, op: UserOperation) -> bytes:
        await self._check_authorization(op)
        op_hash = await self.op_hash(op)
        block_number, now, base_fee = await self._chain_now(max_age_s=HEAD_TTL_S)
        self._reject_banned(op)
        check_sanity(
            op,
            base_fee=0 if self.mode is BundlingMode.MANUAL else base_fee,
            limits=self.config.sanity,
        )
        floor = minimum_pre_verification_gas(op)
        if op.pre_verification_gas < floor:
            raise invalid_params(
                f"preVerificationGas {op.pre_verification_gas} is below the {floor} required"
            )
        # Cheap mempool checks before the costly simulation.
        same_nonce = next(
            (e for e in self.mempool.for_sender(op.sender) if e.op.nonce == op.nonce), None
        )
        if same_nonce is not None:
            self.mempool.check_replacement(same_nonce.op, op)
        self.mempool.check_roles(op, same_nonce)
        outcome = await self.validator.validate(op, now=now, op_hash=op_hash)
        entry = self._entry(op, op_hash, outcome, block_number)
        await self._check_paymaster_deposit(entry)
        required = pre_verification_gas(op, outcome.pre_op_gas - op.pre_verification_gas)
        if self.l1_fees is not None:
            required += await self.l1_fees.gas(op)
        if op.pre_verification_gas < required:
            raise invalid_params(
                f"preVerificationGas {op.pre_verification_gas} is below the {required} required"
            )
        replaced = self.mempool.add(entry)
        if replaced is not None:
            self.tracked.pop(replaced.user_op_hash, None)
            self._forget_seen(replaced)
        self._count_seen(entry)
        self.tracked[op_hash] = Tracked(OpStatus.PENDING)
        self._last_op_at = time.monotonic()
        self._op_arrived.set()
        if len(self.mempool) >= self.config.auto_bundle_mempool_size:
            self._wake.set()
        return op_hash

    def _entry(
        self, op: UserOperation, op_hash: bytes, outcome: ValidationOutcome, block: int
    ) -> MempoolEntry:
        staked = self.config.rules.is_staked
        return MempoolEntry(
            op=op,
            user_op_hash=op_hash,
            outcome=outcome,
            sender_staked=staked(outcome.sender_stake),
            factory_staked=staked(outcome.factory_stake),
            paymaster_staked=staked(outcome.paymaster_stake),
            received_at=time.time(),
            received_block=block,
        )

    @staticmethod
    def _accountable(entry: MempoolEntry) -> list[str]:
        """Entities whose reputation an op counts toward: its factory and paymaster, and its
        sender only when staked (an unstaked sender is limited by count instead)."""
        out = [a for _, a, _ in entry.entities()]
        if entry.sender_staked:
            out.append(entry.op.sender)
        return out

    def _count_seen(self, entry: MempoolEntry) -> None:
        for address in self._accountable(entry):
            self.reputation.seen(address)

    def _forget_seen(self, entry: MempoolEntry) -> None:
        for address in self._accountable(entry):
            self.reputation.unseen(address)

    async def _check_paymaster_deposit(self, entry: MempoolEntry) -> None:
        """EREP-010: the paymaster's deposit must cover all its pending ops at their max cost."""
        paymaster = entry.op.paymaster
        if paymaster is None:
            return
        deposit = (await self._deposits({paymaster}))[paymaster]
        same_nonce = next(
            (e for e in self.mempool.for_sender(entry.op.sender) if e.op.nonce == entry.op.nonce),
            None,
        )
        needed = self.mempool.committed_cost(paymaster, same_nonce) + entry.max_cost
        if needed > deposit:
            raise BundlerError(
                RpcErrorCode.PAYMASTER_DEPOSIT_TOO_LOW,
                f"paymaster deposit too low: {deposit} wei for {needed} wei of pending ops",
            )

    def _reject_banned(self, op: UserOperation) -> None:
        for role, address in (
            ("sender", op.sender),
            ("factory", op.factory),
            ("paymaster", op.paymaster),
        ):
            if address is not None and self.reputation.status(address) is ReputationStatus.BANNED:
                raise BundlerError(RpcErrorCode.BANNED_OR_THROTTLED, f"{role} {address} is banned")

    async def add_unchecked(self, op: UserOperation) -> bytes:
        """debug_bundler_addUserOps: into the mempool without validation."""
        op_hash = await self.op_hash(op)
        block_number, _, _ = await self._chain_now()
        blank = ValidationOutcome(
            0, 0, ValidationData.unpack(0), ValidationData.unpack(0), b"",
            StakeInfo(0, 0), StakeInfo(0, 0), StakeInfo(0, 0),
        )  # fmt: skip
        self.mempool.add(self._entry(op, op_hash, blank, block_number))
        self.tracked[op_hash] = Tracked(OpStatus.PENDING)
        return op_hash

    # ------------------------------------------------------------------ bundling

    async def _auto_bundle_loop(self) -> None:
        """Auto mode: a bundle when the schedule says (once per block, just before it is due,
        or every interval), or at once when a full bundle's worth of ops waits."""
        tick = min(AUTO_TICK_S, self.config.auto_bundle_interval_s)
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), tick)
            full = self._wake.is_set()
            self._wake.clear()
            if self.mode is not BundlingMode.AUTO or not len(self.mempool):
                continue
            started = time.monotonic()
            if not full and not self.schedule.due(started):
                continue
            try:
                if await self.bundle_once(wait=False) is not None:
                    self.schedule.sent(started, time.monotonic(), scheduled=not full)
            except Exception:
                log.exception("bundling failed")

    async def _watch_head_loop(self) -> None:
        """Feeds the block clock: recent blocks' spacing, then when each new block number
        was first seen; every head_poll_s while ops come, every IDLE_HEAD_POLL_S when quiet."""
        with contextlib.suppress(Exception):  # without a seed the clock learns from arrivals
            latest = await self.eth.block_number()
            numbers = range(max(latest - SEED_BLOCKS, 0), latest + 1)
            blocks = await self.eth.rpc.batch(
                [("eth_getBlockByNumber", [hex(n), False]) for n in numbers]
            )
            self.clock.seed([int(b["timestamp"], 16) for b in blocks])
        while True:
            quiet = not len(self.mempool) and time.monotonic() - self._last_op_at > ACTIVE_S
            with contextlib.suppress(TimeoutError):  # an op arriving ends a quiet spell
                await asyncio.wait_for(
                    self._op_arrived.wait(),
                    IDLE_HEAD_POLL_S if quiet else self.config.head_poll_s,
                )
            self._op_arrived.clear()
            if self.mode is not BundlingMode.AUTO:
                continue
            try:
                number = await self.eth.block_number()
            except Exception as exc:  # the node may be down for a while; keep watching
                log.debug("head poll failed: %s", exc)
                continue
            self.clock.observe(number, time.monotonic())

    async def _decay_loop(self) -> None:
        while True:
            await asyncio.sleep(3600)
            self.reputation.decay()

    def _idle_executor(self) -> TransactionManager | None:
        return next((e for e in self.executors if e.idle), None)

    async def _await_idle_executor(self, within_s: float = 60.0) -> None:
        """An explicit bundle request waits for a key whose last bundle has been mined."""
        deadline = time.monotonic() + within_s
        while self._idle_executor() is None and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)

    async def bundle_once(self, *, wait: bool) -> str | None:
        """Build, check and send one bundle; with `wait`, return once it is mined."""
        if wait:
            await self._await_idle_executor()
        async with self._bundle_lock:
            executor = self._idle_executor()
            if executor is None:
                return None
            ops = await self._checked_bundle()
            if not ops:
                log.info("nothing to bundle (%d ops in the mempool)", len(self.mempool))
                return None
            gas = sum(e.max_gas for e in ops) + BUNDLE_OVERHEAD_GAS * 2
            _, _, base_fee = await self._chain_now()
            priority = max(
                self.config.min_priority_fee_per_gas,
                min(e.op.max_priority_fee_per_gas for e in ops),
            )
            max_fee = max(min(e.op.max_fee_per_gas for e in ops), base_fee + priority)
            data = EP.encode_call("handleOps", [e.op.packed() for e in ops], self.beneficiary)
            auths = [e.op.eip7702_auth.to_rpc() for e in ops if e.op.eip7702_auth is not None]
            gas += AUTHORIZATION_GAS * len(auths)
            tx = await executor.send(
                self.config.entry_point, data, gas, max_fee, priority, authorizations=auths
            )
            for e in ops:
                self.mempool.remove(e.user_op_hash)
                self.tracked[e.user_op_hash] = Tracked(OpStatus.SUBMITTED, tx.latest.tx_hash)
            self._in_flight[tx.latest.tx_hash] = {e.op.sender for e in ops}
        log.info("sent a bundle of %d ops: %s", len(ops), tx.latest.tx_hash)
        follow = self._follow(executor, tx, ops)
        if wait:
            await follow
        else:
            task = asyncio.create_task(follow)
            self._following.add(task)
            task.add_done_callback(self._following.discard)
        return tx.latest.tx_hash

    async def _checked_bundle(self) -> list[MempoolEntry]:
        block, now, base_fee = await self._chain_now()
        max_age = self.config.mempool.max_age_s
        for entry, reason in self.mempool.expire(
            now=now, block=block, received_before=time.time() - max_age
        ):
            self.tracked[entry.user_op_hash] = Tracked(OpStatus.DROPPED, reason=reason)
        busy = {s for senders in self._in_flight.values() for s in senders}
        candidates = [e for e in self.mempool.entries() if e.op.sender not in busy]
        chosen = select_bundle(
            candidates,
            base_fee=0 if self.mode is BundlingMode.MANUAL else base_fee,
            reputation=self.reputation,
            limits=self.config.bundle,
        )
        # The second validation (untraced: the trace ran at admission) of every chosen op at
        # once, beside one read of the code every op's validation used (COD-010); the node
        # answers these calls in parallel.
        checks = asyncio.gather(
            *(self.validator.validate(e.op, now=now, trace=False) for e in chosen),
            return_exceptions=True,
        )
        results, changes = await asyncio.gather(
            checks, self.validator.changed_code([e.outcome for e in chosen])
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

    async def _drop_failing(self, ops: list[MempoolEntry]) -> list[MempoolEntry]:
        """eth_call the bundle; drop whichever op the EntryPoint names, until it passes."""
        executor = self.executors[0].address
        while ops:
            data = EP.encode_call("handleOps", [e.op.packed() for e in ops], self.beneficiary)
            # The bundle transaction applies EIP-7702 authorizations first; so must the check.
            delegations: dict[str, Any] = {}
            for e in ops:
                delegations.update(eip7702_override(e.op) or {})
            try:
                await self.eth.call(
                    self.config.entry_point,
                    data,
                    sender=executor,
                    block=SIMULATION_BLOCK,
                    state_override=delegations or None,
                )
                return ops
            except RpcError as exc:
                decoded = EP.decode_error(exc.revert_data or b"")
                if decoded is None or decoded.name not in ("FailedOp", "FailedOpWithRevert"):
                    log.warning("bundle of %d ops reverts: %s", len(ops), exc)
                    return []
                culprit = ops.pop(int(decoded.args[0]))
                error = failed_op_error(decoded)
                self._drop(culprit, error.message)
                self._blame(culprit, error, after_second_validation=True)
        return []

    def _blame(
        self, entry: MempoolEntry, exc: BundlerError, *, after_second_validation: bool = False
    ) -> None:
        """Who answers for an op that passed admission but failed before bundling."""
        op = entry.op
        paymaster_failed = exc.code is RpcErrorCode.REJECTED_BY_PAYMASTER
        if op.paymaster is not None and (not paymaster_failed or entry.sender_staked):
            # EREP-015: not the paymaster's fault; EREP-030: a staked account answers for it.
            self.reputation.unseen(op.paymaster)
        elif op.paymaster is not None and after_second_validation:
            self.reputation.penalise(op.paymaster)  # GREP-040
        if not paymaster_failed and op.factory is not None and entry.factory_staked:
            self.reputation.penalise(op.factory)  # EREP-020: the factory answers for its account

    def _drop(self, entry: MempoolEntry, reason: str) -> None:
        log.info("dropped op 0x%s of %s: %s", entry.user_op_hash.hex(), entry.op.sender, reason)
        self.mempool.remove(entry.user_op_hash)
        self.tracked[entry.user_op_hash] = Tracked(OpStatus.DROPPED, reason=reason)

    async def _deposits(self, paymasters: set[str]) -> dict[str, int]:
        deposits = {}
        for pm in paymasters:
            raw = await self.eth.call(self.config.entry_point, EP.encode_call("balanceOf", pm))
            deposits[pm] = int(EP.decode_output("balanceOf", raw)[0])
        return deposits

    async def _follow(self, executor: TransactionManager, tx: Any, ops: list[MempoolEntry]) -> None:
        first_hash = tx.latest.tx_hash
        try:
            receipt = await executor.wait(tx)
        except TransactionDroppedError as exc:
            for e in ops:
                self.tracked[e.user_op_hash] = Tracked(OpStatus.DROPPED, reason=str(exc))
            return
        finally:
            self._in_flight.pop(first_hash, None)
        self._record(receipt, ops)

    def _record(self, receipt: TxReceipt, ops: list[MempoolEntry]) -> None:
        topic = EP.event_topic("UserOperationEvent")
        outcomes = {}
        for entry_log in receipt.logs:
            if entry_log.topics and entry_log.topics[0] == topic:
                outcomes[entry_log.topics[1]] = EP.decode_event(
                    "UserOperationEvent", entry_log.topics, entry_log.data
                )["success"]
        for e in ops:
            success = outcomes.get(e.user_op_hash)
            if success is None:
                self.tracked[e.user_op_hash] = Tracked(
                    OpStatus.FAILED, receipt.tx_hash, "not in bundle"
                )
                continue
            status = OpStatus.INCLUDED if success else OpStatus.FAILED
            self.tracked[e.user_op_hash] = Tracked(status, receipt.tx_hash)
            for address in self._accountable(e):
                self.reputation.included(address)

    # ------------------------------------------------------------------ queries

    async def status(self, op_hash: bytes) -> dict[str, Any]:
        tracked = self.tracked.get(op_hash)
        # Pending or submitted by our own account: its bundle's follower marks it the moment
        # the receipt appears, so the node need not be asked (clients poll this hard).
        in_flight = tracked is not None and tracked.status in (
            OpStatus.PENDING,
            OpStatus.SUBMITTED,
        )
        receipt = None if in_flight else await self.receipts.receipt(op_hash)
        if receipt is not None:
            status = OpStatus.INCLUDED if receipt["success"] else OpStatus.FAILED
            return {
                "status": status.value,
                "transactionHash": receipt["receipt"]["transactionHash"],
            }
        if tracked is None:
            return {"status": OpStatus.NOT_FOUND.value}
        if tracked.status in (OpStatus.INCLUDED, OpStatus.FAILED):
            # We saw it mined, the chain no longer has it: a reorg took it; it is pending again
            # only if resubmitted, so report it as dropped.
            return {"status": OpStatus.DROPPED.value, "reason": "its block left the chain"}
        out: dict[str, Any] = {"status": tracked.status.value}
        if tracked.tx_hash:
            out["transactionHash"] = tracked.tx_hash
        if tracked.reason:
            out["reason"] = tracked.reason
        return out

    def clear(self) -> None:
        self.mempool.clear()
        self.reputation.clear()
        self.tracked.clear()
