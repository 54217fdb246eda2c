"""The elected bundler leader of a chain: it bundles what the API replicas wrote to the
durable intake, and writes back what became of each op.

On taking over, and every poll after, it loads the intake's open ops it has not loaded yet.
Each one received before this leader took over is first looked up on the chain, once the
bundles the dead leader had sent from the executor keys are mined (`bundler.takeover`): a
dead leader may have sent it in a bundle that was mined (it is marked included or failed,
with that bundle's transaction, never sent again), or the sender's nonce may have moved on
(dropped, with that reason). Then it
enters the mempool: on the API's validation when that was made at most FRESH_BLOCKS behind
the head (the mempool's rules still apply; bundling simulates each op again and compares its
code hashes before the bundle is sent), else validated again, the chain's state having
changed since the API accepted it; the bundler's own loops bundle it. An op refused only
for want of room in the mempool (CAPACITY) waits in the intake and is tried again; any other
refusal drops it, with the reason. What the bundler learns of
each loaded op (submitted, included, failed, dropped with its reason) is written back to the
intake, so any API replica answers for it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

from entryway import contracts
from entryway.bundler.errors import BundlerError, RpcErrorCode
from entryway.bundler.service import HEAD_TTL_S, Bundler
from entryway.bundler.states import OpStatus
from entryway.bundler.submission import Attempt
from entryway.bundler.takeover import PreviousBundles, mined_op
from entryway.bundler.validation.outcome import ValidationOutcome
from entryway.bundler.validation.outcome_json import outcome_from_json
from entryway.chain.rpc import RpcError, RpcTransportError
from entryway.domain.evm import hex_to_bytes
from entryway.domain.userop import UserOperation

log = logging.getLogger("entryway.bundler.leader")
EP = contracts.load("EntryPoint").abi
FINAL = (OpStatus.INCLUDED, OpStatus.FAILED, OpStatus.DROPPED)
NONCE_SEQUENCE_BITS = 64  # an EntryPoint nonce is key (192 bits) | sequence (64 bits)
# Refusals about the mempool's room rather than the op (an unstaked sender's four pending ops
# or an unstaked factory's or paymaster's allowance, -32505 from the mempool alone; a throttled
# entity's four; a paymaster deposit committed to pending ops; a full mempool): the API, whose
# mempool is empty, could not see them. Such an op waits in the intake, tried again every
# RETRY_S while the mempool holds ops that may drain, until the mempool's maximum age.
CAPACITY = (
    RpcErrorCode.BANNED_OR_THROTTLED,
    RpcErrorCode.STAKE_TOO_LOW,
    RpcErrorCode.PAYMASTER_DEPOSIT_TOO_LOW,
    RpcErrorCode.INTERNAL_ERROR,
)
RETRY_S = 2.0
PREVIOUS_RETRY_S = 0.25  # an inherited op, while the previous leader's bundles are pending
LOAD_CONCURRENCY = 32  # senders whose new ops are loaded at once
FOLLOW_S = 0.05  # while a burst of ops arrives, the intake is looked at this often
FOLLOW_LOOKS = 5  # looks per step at most
TAKEOVER_MARGIN = timedelta(seconds=5)
# An op the API validated at most this many blocks behind the head enters the mempool on that
# validation; an older one is simulated again (bundling re-checks every op in any case).
FRESH_BLOCKS = 2


class OpenOp(Protocol):
    @property
    def user_op_hash(self) -> str: ...

    @property
    def op(self) -> UserOperation: ...

    @property
    def received_at(self) -> datetime: ...

    @property
    def validation(self) -> str | None: ...

    @property
    def validated_block(self) -> int | None: ...


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of a loaded op, to write back to the intake."""

    user_op_hash: str
    status: OpStatus
    tx_hash: str | None = None
    reason: str | None = None
    attempts: tuple[Attempt, ...] = ()  # the bundle's sends, fee bumps included


class LeaderIntake(Protocol):
    """The intake as the leader uses it (`storage.intake.OpIntakeStore`)."""

    async def open_ops(
        self,
        chain_id: int,
        *,
        skip: frozenset[str] = frozenset(),
        limit: int = 500,
        entry_point: str | None = None,
    ) -> Sequence[OpenOp]: ...

    async def mark(
        self,
        chain_id: int,
        user_op_hash: str,
        status: OpStatus,
        *,
        tx_hash: str | None = None,
        reason: str | None = None,
        at: datetime | None = None,
    ) -> bool: ...

    async def mark_many(
        self, chain_id: int, outcomes: Sequence[Outcome], *, at: datetime | None = None
    ) -> None: ...


@dataclass
class IntakeLeader:
    bundler: Bundler
    intake: LeaderIntake
    # Loaded ops still owed an outcome: hash -> the status last written for it.
    loaded: dict[str, OpStatus] = field(default_factory=dict)
    # Ops waiting for room in the mempool: hash -> when to try again (monotonic seconds).
    waiting: dict[str, float] = field(default_factory=dict)
    # When this leader took over: an op received well after it cannot have been sent by an
    # earlier leader, so it skips the look-ups for that (see `_load`).
    leading_since: datetime = field(default_factory=lambda: datetime.now(UTC))
    # The bundles the previous leader left pending; None: read from the executors' nonces.
    previous: PreviousBundles | None = None
    # Loaded ops whose bundle was sent: hash -> the sends written for it (a fee bump, the
    # status unchanged, is written back too).
    sends: dict[str, int] = field(default_factory=dict)
    # Whether those are mined, as of this step: inherited ops wait for them.
    _previous_settled: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        if self.previous is None:
            executors = [e.address for e in self.bundler.executors]
            self.previous = PreviousBundles(self.bundler.eth, executors)

    @property
    def chain_id(self) -> int:
        return self.bundler.config.chain_id

    async def step(self) -> None:
        """Load the intake's new open ops, then write back what became of the loaded ones.

        Ops come in bursts (clients answering the same block's receipts): while a look finds
        new ops or ops are in flight, the intake is looked at again FOLLOW_S later, up to
        FOLLOW_LOOKS times, so that the ops of a burst reach the mempool in time for the same
        bundle rather than one poll interval apart. An idle intake is looked at once."""
        for look in range(FOLLOW_LOOKS):
            if look:
                await asyncio.sleep(FOLLOW_S)
            found = await self._load_new()
            await self._write_back()
            if not found and not self.loaded:
                return

    async def _load_new(self) -> int:
        """Load the intake's open ops not loaded yet; how many there were. Ops of different
        senders are loaded concurrently (each may be looked up on the chain and validated again:
        node round trips), as the standalone bundler takes concurrent sends; a sender's ops
        one after the other, oldest first."""
        assert self.previous is not None
        await self.previous.start()  # before this leader sends a bundle of its own
        now = time.monotonic()
        skip = frozenset(self.loaded) | {h for h, at in self.waiting.items() if at > now}
        by_sender: dict[str, list[OpenOp]] = {}
        rows = await self.intake.open_ops(
            self.chain_id, skip=skip, entry_point=self.bundler.config.entry_point
        )
        for row in rows:
            by_sender.setdefault(row.op.sender.lower(), []).append(row)
        if not self._previous_settled and any(not self._new_since_takeover(r) for r in rows):
            self._previous_settled = await self.previous.settled()
        room = asyncio.Semaphore(LOAD_CONCURRENCY)

        async def load_in_order(rows: list[OpenOp]) -> None:
            async with room:
                for row in rows:
                    await self._load(row)

        outcomes = await asyncio.gather(
            *(load_in_order(rows) for rows in by_sender.values()), return_exceptions=True
        )
        failure = next((o for o in outcomes if isinstance(o, BaseException)), None)
        if failure is not None:
            raise failure
        return len(rows)

    async def _load(self, row: OpenOp) -> None:
        op_hash = row.user_op_hash
        self.waiting.pop(op_hash, None)
        outcome = None
        try:
            if not self._new_since_takeover(row):
                if not self._previous_settled:  # the dead leader's bundle may carry it
                    self.waiting[op_hash] = time.monotonic() + PREVIOUS_RETRY_S
                    return
                if await self._settled_before(row):
                    return
            outcome = await self._fresh_validation(row)
            if outcome is None:
                # An op a previous leader loaded may ride in a bundle the node still holds:
                # validated on the pending block, where that bundle has used its nonce.
                await self.bundler.send(row.op, on_pending=not self._new_since_takeover(row))
            else:
                assert row.validated_block is not None
                await self.bundler.admit_validated(row.op, outcome, row.validated_block)
        except BundlerError as exc:
            if self._may_wait(row, exc):
                self.waiting[op_hash] = time.monotonic() + RETRY_S
                return
            # An inherited op refused because a bundle of the previous leader mined it since
            # it was looked up (one stuck past the wait, say): the chain decides.
            if not self._new_since_takeover(row) and await self._mined_before(row):
                return
            refused = "refused on revalidation" if outcome is None else "refused by the mempool"
            reason = f"{refused}: {exc.message}"
            await self.intake.mark(self.chain_id, op_hash, OpStatus.DROPPED, reason=reason)
            return
        except (RpcTransportError, RpcError) as exc:
            log.warning("cannot load op %s yet (node error: %s); retrying", op_hash, exc)
            return  # not loaded: the next step tries again
        self.loaded[op_hash] = OpStatus.PENDING

    async def _fresh_validation(self, row: OpenOp) -> ValidationOutcome | None:
        """The API's validation of the op, when it was made at most FRESH_BLOCKS behind the
        head: the op is then admitted without simulating it again. None (validate again): no
        validation, an older one, or one that does not read."""
        if row.validation is None or row.validated_block is None:
            return None
        head, _, _ = await self.bundler.head.now(max_age_s=HEAD_TTL_S)
        if row.validated_block < head - FRESH_BLOCKS:
            return None
        try:
            return outcome_from_json(row.validation)
        except ValueError as exc:
            log.warning(
                "op %s: unreadable validation (%s); validating again", row.user_op_hash, exc
            )
            return None

    def _new_since_takeover(self, row: OpenOp) -> bool:
        """Received more than TAKEOVER_MARGIN after this leader took over (the margin covers
        clock differences between the API's host and this one): no earlier leader can have
        loaded it, so it need not be looked up on the chain before validation (two node
        round trips an op in the steady state)."""
        return row.received_at > self.leading_since + TAKEOVER_MARGIN

    async def _settled_before(self, row: OpenOp) -> bool:
        """Whether an earlier leader's bundle settled the op: mined (marked included or
        failed, never sent again) or its nonce used by another op (dropped, with that)."""
        if await self._mined_before(row):
            return True
        used = await self._nonce_used(row.op)
        if used is not None:
            await self.intake.mark(self.chain_id, row.user_op_hash, OpStatus.DROPPED, reason=used)
            return True
        return False

    async def _mined_before(self, row: OpenOp) -> bool:
        """Whether the op's UserOperationEvent is on the chain; if so it is marked included
        (or failed) with the transaction that carried it."""
        op_hash = row.user_op_hash
        config = self.bundler.config
        mined = await mined_op(
            self.bundler.eth,
            config.entry_point,
            op_hash,
            validated_block=row.validated_block,
            lookback_blocks=config.receipt_lookback_blocks,
        )
        if mined is not None:  # mined already, in a bundle of the leader before
            status = OpStatus.INCLUDED if mined.success else OpStatus.FAILED
            log.info(
                "op %s was mined by the previous leader (tx %s, block %d)",
                op_hash, mined.tx_hash, mined.block,
            )  # fmt: skip
            await self.intake.mark(self.chain_id, op_hash, status, tx_hash=mined.tx_hash)
            return True
        return False

    def _may_wait(self, row: OpenOp, refusal: BundlerError) -> bool:
        """Whether a refused op may wait for room in the mempool (see CAPACITY)."""
        age = (datetime.now(UTC) - row.received_at).total_seconds()
        return (
            refusal.code in CAPACITY
            and len(self.bundler.mempool) > 0
            and age < self.bundler.config.mempool.max_age_s
        )

    async def _nonce_used(self, op: UserOperation) -> str | None:
        key = op.nonce >> NONCE_SEQUENCE_BITS
        raw = await self.bundler.eth.call(
            self.bundler.config.entry_point, EP.encode_call("getNonce", op.sender, key)
        )
        current = int(EP.decode_output("getNonce", raw)[0])
        if current > op.nonce:
            return f"nonce already used: the sender's next nonce is {current}, the op's {op.nonce}"
        return None

    async def _write_back(self) -> None:
        """What became of the loaded ops since the last step, written in one transaction (and
        taken as written only once it committed)."""
        outcomes: list[Outcome] = []
        now_loaded: dict[str, OpStatus | None] = {}  # None: owed nothing more
        for op_hash, written in list(self.loaded.items()):
            raw = hex_to_bytes(op_hash)
            tracked = self.bundler.tracked.get(raw)
            if tracked is None:
                if self.bundler.mempool.get(raw) is not None:
                    continue
                replaced = "replaced by another op of the same sender and nonce"
                outcomes.append(Outcome(op_hash, OpStatus.DROPPED, reason=replaced))
                now_loaded[op_hash] = None
                continue
            if tracked.status is written and len(tracked.attempts) == self.sends.get(op_hash, 0):
                continue
            status = tracked.status
            tx_hash: str | None = tracked.tx_hash
            reason: str | None = tracked.reason
            if status is OpStatus.DROPPED:
                # Dropped here, yet maybe mined by a bundle the dead leader sent that landed
                # first (its ops were validated again and sent anew): the chain decides.
                receipt = await self.bundler.receipts.receipt(raw)
                if receipt is not None:
                    status = OpStatus.INCLUDED if receipt["success"] else OpStatus.FAILED
                    tx_hash, reason = receipt["receipt"]["transactionHash"], None
            attempts = tuple(tracked.attempts)
            outcomes.append(Outcome(op_hash, status, tx_hash, reason, attempts))
            now_loaded[op_hash] = None if tracked.status in FINAL else tracked.status
        if outcomes:
            await self.intake.mark_many(self.chain_id, outcomes)
        self.sends.update({o.user_op_hash: len(o.attempts) for o in outcomes if o.attempts})
        for op_hash, state in now_loaded.items():
            if state is None:
                self.loaded.pop(op_hash, None)
                self.sends.pop(op_hash, None)
            else:
                self.loaded[op_hash] = state
