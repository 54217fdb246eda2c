"""Bundling through the durable intake, the one path of every op the service accepts: the
accepting side (an API replica, a worker's recovery step).

The accepting process validates an op as a bundler does (sanity, simulation,
ERC-7562), then, instead of adding it to a mempool of its own, hands it to the intake in the
database, for the chain's elected bundler leader (`bundler.leader`) to bundle. The row carries
the validation and the head block it was made at: the leader admits a fresh one to its
mempool without simulating the op again. The op is
written in the transaction that records what it costs: while the caller's `before_mempool`
hook runs, `admitting` names the op, and the relay accounting writes it with the charge
(`paymaster.relay_accounting`). An op sent without accounting is written on its own.

The status, the by-hash answer and the receipt come from the chain and the intake row, so
every replica answers alike whichever one took the op.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from entryway.bundler.mempool import MempoolEntry
from entryway.bundler.service import BeforeMempool, Bundler, BundlerConfig
from entryway.bundler.states import OpStatus
from entryway.bundler.submission import TransactionManager
from entryway.bundler.validation.outcome_json import outcome_to_json
from entryway.bundler.validation.simulation import Validator
from entryway.chain.rpc import EthClient
from entryway.domain.evm import to_hex
from entryway.domain.userop import UserOperation

log = logging.getLogger("entryway.bundler.intake")


@dataclass(slots=True)
class IntakeAdmission:
    """The op being admitted to the intake, for the accounting to write with its charge, with
    this replica's validation of it (`outcome_json`) and the head block that was made at;
    `written` once the accounting's transaction, with the op in it, committed."""

    entry_point: str
    op: UserOperation
    validation: str | None = None
    validated_block: int | None = None
    written: bool = False


_SENT = (OpStatus.SUBMITTED, OpStatus.INCLUDED, OpStatus.FAILED)  # rows naming a bundle
TRUST_OPEN = timedelta(seconds=60)  # see `IntakeBundler.unmined`
BLOCK_LEFT_THE_CHAIN = "its block left the chain"  # the reason a bundler's mempool gives

# Set only while a `before_mempool` hook of an intake admission runs (same task).
admitting: ContextVar[IntakeAdmission | None] = ContextVar("intake_admitting", default=None)
# Within one answer (`IntakeBundler.one_answer`): the op states read so far, by (chain, hash).
_answering: ContextVar[dict[tuple[int, str], Any] | None] = ContextVar(
    "intake_answering", default=None
)


class IntakeStateView(Protocol):
    """Where an op stands in the intake, as a status or receipt poll reads it."""

    @property
    def status(self) -> OpStatus: ...

    @property
    def tx_hash(self) -> str | None: ...

    @property
    def reason(self) -> str | None: ...

    @property
    def received_at(self) -> datetime: ...

    @property
    def entry_point(self) -> str: ...


class IntakeView(IntakeStateView, Protocol):
    """An intake row as this side reads it: its state and the op."""

    @property
    def op(self) -> UserOperation: ...


class OpIntake(Protocol):
    """The intake table (`storage.intake.OpIntakeStore`)."""

    async def add(
        self,
        *,
        chain_id: int,
        user_op_hash: str,
        entry_point: str,
        op: UserOperation,
        project_id: str | None = None,
        at: datetime | None = None,
        validation: str | None = None,
        validated_block: int | None = None,
    ) -> None: ...

    async def get(self, chain_id: int, user_op_hash: str) -> IntakeView | None: ...

    async def state(self, chain_id: int, user_op_hash: str) -> IntakeStateView | None:
        """The op's state alone; reads of many polls at once may share one query."""
        ...


class IntakeBundler(Bundler):
    """A bundler that validates and writes to the intake; it holds no executor key and never
    bundles (it is never started)."""

    intake_only = True

    def __init__(
        self,
        eth: EthClient,
        executors: list[TransactionManager],
        validator: Validator,
        config: BundlerConfig,
        *,
        intake: OpIntake,
        on_written: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(eth, executors, validator, config)
        self.intake = intake
        # Told once an op is in the intake: a leader in this process bundles it without
        # waiting for its next poll.
        self.on_written = on_written

    async def _admit(self, entry: MempoolEntry, before_mempool: BeforeMempool | None) -> None:
        await self._write(entry, before_mempool)
        if self.on_written is not None:
            self.on_written()

    async def _write(self, entry: MempoolEntry, before_mempool: BeforeMempool | None) -> None:
        op_hash = to_hex(entry.user_op_hash)
        validation = outcome_to_json(entry.outcome)
        if before_mempool is not None:
            admission = IntakeAdmission(
                self.config.entry_point, entry.op, validation, entry.received_block
            )
            token = admitting.set(admission)
            try:
                await before_mempool(entry.op, entry.user_op_hash)
            finally:
                admitting.reset(token)
            if admission.written:
                return
            if await self.intake.get(self.config.chain_id, op_hash) is not None:
                return
            # The hook accounted for the op without writing it (not the relay accounting):
            # write it now, so that an op whose hash is returned is never lost.
            log.warning("op %s accounted without its intake row; writing it alone", op_hash)
        await self.intake.add(
            chain_id=self.config.chain_id,
            user_op_hash=op_hash,
            entry_point=self.config.entry_point,
            op=entry.op,
            validation=validation,
            validated_block=entry.received_block,
        )

    @contextlib.contextmanager
    def one_answer(self) -> Iterator[None]:
        """A receipt or status poll asks each of the chain's EntryPoints' bundlers in turn,
        and each whether the op is open, then for its receipt: all of them share one read of
        the op's intake state (one intake store serves the chain)."""
        token = _answering.set({})
        try:
            yield
        finally:
            _answering.reset(token)

    async def _state(self, op_hash: bytes) -> IntakeStateView | None:
        """The op's intake state, read once per answer (`one_answer`)."""
        key = (self.config.chain_id, to_hex(op_hash))
        read = _answering.get()
        if read is not None and key in read:
            state: IntakeStateView | None = read[key]
            return state
        state = await self.intake.state(*key)
        if read is not None:
            read[key] = state
        return state

    async def pending_op(self, op_hash: bytes) -> UserOperation | None:
        row = await self.intake.get(self.config.chain_id, to_hex(op_hash))
        if row is None or row.status not in (OpStatus.PENDING, OpStatus.SUBMITTED):
            return None
        return row.op

    async def unmined(self, op_hash: bytes) -> bool:
        """Open in the intake and received recently: clients poll receipts hard, and one
        indexed read here spares the node a head and a log query per EntryPoint. Once the
        leader wrote that it sent the op's bundle, that bundle's receipt is read (shared by
        the polls of all its ops, BUNDLE_READ_REUSE_S apart at most): the client learns of the
        block as soon as this replica can see it, not once the leader has written it back."""
        row = await self._open_row(op_hash)
        return row is not None and self._ours(row) and not self._may_be_mined(row)

    def _ours(self, row: IntakeStateView) -> bool:
        """Whether the op was sent to this bundler's EntryPoint: an op hash names its
        EntryPoint, so another EntryPoint's bundler on the chain neither has it nor reads
        its bundle (the chain's EntryPoints are asked in turn)."""
        return row.entry_point.lower() == self.config.entry_point.lower()

    def _may_be_mined(self, row: IntakeStateView) -> bool:
        """The op's bundle was sent, and not found unmined in the last BUNDLE_READ_REUSE_S."""
        return (
            self._ours(row)
            and row.status is OpStatus.SUBMITTED
            and row.tx_hash is not None
            and not self.receipts.recently_unmined(row.tx_hash)
        )

    async def bundle_of(self, op_hash: bytes) -> str | None:
        """The transaction the leader wrote that it sent the op in, if any."""
        row = await self._state(op_hash)
        if row is None or not self._ours(row) or row.status not in _SENT:
            return None
        return row.tx_hash

    async def receipt(self, op_hash: bytes, *, l1_fee: bool = True) -> dict[str, Any] | None:
        """The op's receipt, read off the bundle its intake row names, if any."""
        l1_fees = self.l1_fees if l1_fee else None
        row = await self._state(op_hash)
        if row is not None and not self._ours(row):
            return None
        if row is None or not row.tx_hash or row.status not in _SENT:
            return await self.receipts.receipt(op_hash, l1_fees)
        # Sent recently and not seen mined: no log search while its bundle is not mined.
        search_logs = row.status is not OpStatus.SUBMITTED or not _recent(row)
        return await self.receipts.of_bundle(op_hash, row.tx_hash, l1_fees, search_logs=search_logs)

    async def _open_row(self, op_hash: bytes) -> IntakeStateView | None:
        """The op's state while it is open and younger than TRUST_OPEN; an older open row (its
        leader gone, perhaps) is checked on the chain instead."""
        row = await self._state(op_hash)
        if row is None or row.status not in (OpStatus.PENDING, OpStatus.SUBMITTED):
            return None
        return row if _recent(row) else None

    async def _reorged_away(self, row: IntakeView) -> bool:
        """The leader saw the op mined (final for it: the row would say so forever), and the
        chain no longer has its bundle: a reorg took the block. An op merely older than the
        receipt lookback still has its bundle's receipt."""
        if row.status not in (OpStatus.INCLUDED, OpStatus.FAILED) or not row.tx_hash:
            return False
        return await self.eth.rpc.request("eth_getTransactionReceipt", [row.tx_hash]) is None

    async def status(self, op_hash: bytes) -> dict[str, Any]:
        open_row = await self._open_row(op_hash)
        if open_row is not None and not self._may_be_mined(open_row):
            return _answer(open_row)  # as the intake says, without a node call
        receipt = await self.receipt(op_hash, l1_fee=False)
        if receipt is not None:
            status = OpStatus.INCLUDED if receipt["success"] else OpStatus.FAILED
            return {
                "status": status.value,
                "transactionHash": receipt["receipt"]["transactionHash"],
            }
        row = await self.intake.get(self.config.chain_id, to_hex(op_hash))
        if row is None:
            return {"status": OpStatus.NOT_FOUND.value}
        if await self._reorged_away(row):
            return {"status": OpStatus.DROPPED.value, "reason": BLOCK_LEFT_THE_CHAIN}
        return _answer(row)


def _recent(row: IntakeStateView) -> bool:
    return datetime.now(UTC) - row.received_at < TRUST_OPEN


def _answer(row: IntakeView | IntakeStateView) -> dict[str, Any]:
    """The op's status as its intake row says it."""
    out: dict[str, Any] = {"status": row.status.value}
    if row.tx_hash:
        out["transactionHash"] = row.tx_hash
    if row.reason:
        out["reason"] = row.reason
    return out
