"""Settling sponsorship holds: an op our paymaster signed was charged its estimate (a hold);
when its receipt appears the hold settles on the receipt's `actualGasCost`; when its validity
window has passed without a receipt, or the bundler reports it dropped, the hold is released.

Each op sent through the service gets a durable task (`SETTLE_TASK`, handled by
`SettleHandler` in the service's worker) that checks it until its fate is known, across
restarts. Holds for ops that were signed but never sent through the service are released by
`release_unsent` once their window has passed. Every check is idempotent: settling or
releasing twice changes nothing."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from entryway.bundler.errors import BundlerError
from entryway.bundler.port import BundlerPort, OpStatus, Receipt
from entryway.domain.pricebook import OperationType, PriceBook
from entryway.domain.tasks import PermanentTaskError, RetryTaskError, Task
from entryway.domain.userop import UserOperation
from entryway.domain.userop_json import op_from_json, op_to_json
from entryway.paymaster.costs import (
    CreditsCounted,
    release_sponsorship,
    settle_sponsorship,
    sponsorship_key,
    sponsorship_quote,
)
from entryway.paymaster.inclusions import Inclusion, InclusionLedger
from entryway.paymaster.ports import ENTRYWAY, SettlementLedger, SignatureBook

SPONSORED = OperationType.SPONSORED_USER_OPERATION.value

log = logging.getLogger(__name__)
GRACE_SECONDS = 120  # after validUntil, before an unmined op's hold is released
SETTLE_TASK = "sponsorship.settle"
SETTLE_POLL_SECONDS = 2.0
SETTLE_MAX_ATTEMPTS = 2_000  # polls: covers the longest validity window several times
_UNMINED = (OpStatus.NOT_FOUND, OpStatus.FAILED, OpStatus.DROPPED)
Settled = Callable[["SponsoredOp", Receipt], Awaitable[None]]  # the op and its receipt
Dropped = Callable[["SponsoredOp", str], Awaitable[None]]  # the op and why it never landed
# A hold released unsent: its project, its idempotency key, why.
ReleasedUnsent = Callable[[str, str, str], Awaitable[None]]
EXPIRED_UNMINED = "its validity window passed without it being mined"
UNSENT = "it was signed for sponsorship but never sent through the service before it expired"


@dataclass(frozen=True, slots=True)
class SponsoredOp:
    project_id: str
    chain_id: int
    user_op_hash: str
    op: UserOperation
    valid_until: int  # unix seconds, from the paymaster data
    reorged: int = 0  # how often a reorg removed the block it was mined in (`paymaster.reorgs`)
    # Where it came from once mined: "entryway" (our bundler) or "external" (around it).
    submitted_by: str = ENTRYWAY


class SponsorshipSettler:
    """Settles or releases one op's hold (`check`), and, in the background, releases the
    holds of ops never sent once their windows have passed (`unsent_after` after signing)."""

    def __init__(
        self,
        ledger: SettlementLedger,
        prices: PriceBook,
        chains: Mapping[int, BundlerPort],
        *,
        unsent_after: timedelta = timedelta(minutes=20),
        sweep_s: float = 60.0,
        clock: Callable[[], float] = time.time,
        on_settled: Settled | None = None,
        on_dropped: Dropped | None = None,
        on_released_unsent: ReleasedUnsent | None = None,
        counted: CreditsCounted | None = None,
        inclusions: InclusionLedger | None = None,
        signatures: SignatureBook | None = None,
    ) -> None:
        self.ledger = ledger
        self.prices = prices
        self.chains = chains
        self.unsent_after = unsent_after
        self.sweep_s = sweep_s
        self.clock = clock
        self.on_settled = on_settled
        self.on_dropped = on_dropped
        self.on_released_unsent = on_released_unsent
        self.counted = counted  # the credits metric, told each settlement's charge
        # Records the block of each settlement, so that a reorg removing it reverses it.
        self.inclusions = inclusions
        # The paymaster's signatures and how far each chain's events were read: a hold is
        # released only once every signature drawing on it is dead (`signatures_dead`).
        self.signatures = signatures
        self._resent: set[tuple[int, str]] = set()  # reorged ops sent to the mempool again
        self._task: asyncio.Task[None] | None = None
        self._failing: set[tuple[str, str]] = set()  # holds the sweep could not release

    async def check(self, sponsored: SponsoredOp) -> bool:
        """Settle or release if the op's fate is known; True when done with it."""
        bundler = self.chains[sponsored.chain_id]
        now = datetime.now(UTC)
        receipt = await bundler.receipt(sponsored.user_op_hash)
        if receipt is not None:
            await self._settle(sponsored, receipt, now)
            if self.on_settled is not None:
                await self.on_settled(sponsored, receipt)
            return True
        report = await bundler.status(sponsored.user_op_hash)
        status = report.status
        if sponsored.reorged and status in _UNMINED and await self._send_again(sponsored):
            return False
        expired = self.clock() > sponsored.valid_until + GRACE_SECONDS
        if expired and status in _UNMINED and self.signatures is not None:
            hold_key = sponsorship_key(sponsored.chain_id, sponsored.op)
            dead = await signatures_dead(
                self.signatures, sponsored.project_id, hold_key, GRACE_SECONDS
            )
            expired = dead is not False  # not until the chain shows it can no longer land
        if status is OpStatus.DROPPED or (expired and status in _UNMINED):
            await release_sponsorship(
                self.ledger,
                project_id=sponsored.project_id,
                chain_id=sponsored.chain_id,
                op=sponsored.op,
                at=now,
            )
            if self.on_dropped is not None:
                reason = report.reason if status is OpStatus.DROPPED else None
                await self.on_dropped(sponsored, reason or EXPIRED_UNMINED)
            return True
        return False

    async def charge(self, sponsored: SponsoredOp, receipt: Receipt) -> None:
        """Settle an op's hold from the receipt the chain has for it, whoever submitted it,
        and announce it (`on_settled`, idempotent per op): the chain's paymaster events
        come here (`paymaster.chain_charges`)."""
        await self._settle(sponsored, receipt, datetime.now(UTC))
        if self.on_settled is not None:
            await self.on_settled(sponsored, receipt)

    async def _settle(self, sponsored: SponsoredOp, receipt: Receipt, now: datetime) -> None:
        if self.inclusions is None:
            await settle_sponsorship(
                self.ledger,
                self.prices,
                project_id=sponsored.project_id,
                chain_id=sponsored.chain_id,
                op=sponsored.op,
                actual_gas_cost_wei=receipt.actual_gas_cost,
                at=now,
                counted=self.counted,
                l1_fee_wei=receipt.l1_fee,
            )
            return
        actual = sponsorship_quote(
            self.prices,
            sponsored.chain_id,
            sponsored.op,
            receipt.actual_gas_cost,
            receipt.l1_fee,
        )
        inclusion = Inclusion(
            sponsored.chain_id,
            sponsored.user_op_hash,
            receipt.block_number,
            receipt.transaction_hash,
        )
        key = sponsorship_key(sponsored.chain_id, sponsored.op)
        record = await self.inclusions.settle_included(
            sponsored.project_id, key, actual, now, inclusion
        )
        if self.counted is not None and not record.duplicate:
            self.counted(actual.operation.value, record.credits)

    async def _send_again(self, sponsored: SponsoredOp) -> bool:
        """A reorg removed the block of this op, and no block has it now: back to the
        mempool if still valid (once per process). False when it is not (it is dropped)."""
        key = (sponsored.chain_id, sponsored.user_op_hash)
        if key in self._resent or self.clock() > sponsored.valid_until:
            return False
        try:
            await self.chains[sponsored.chain_id].send(sponsored.op)
        except BundlerError as exc:
            log.info(
                "op %s, whose block a reorg removed, is no longer valid: %s",
                sponsored.user_op_hash,
                exc.message,
            )
            return False
        self._resent.add(key)
        log.info(
            "op %s, whose block a reorg removed, is back in the mempool", sponsored.user_op_hash
        )
        return True

    async def sweep(self) -> int:
        now = datetime.now(UTC)
        return await release_unsent(
            self.ledger,
            older_than=now - self.unsent_after,
            at=now,
            failing=self._failing,
            on_released=self.on_released_unsent,
            signatures=self.signatures,
        )

    async def start(self) -> None:
        self._task = asyncio.create_task(self._forever())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _forever(self) -> None:
        while True:
            try:
                await self.sweep()
            except Exception:
                log.exception("releasing unsent sponsorship holds failed; retrying")
            await asyncio.sleep(self.sweep_s)


def settle_payload(sponsored: SponsoredOp) -> dict[str, Any]:
    payload = {
        "projectId": sponsored.project_id,
        "chainId": sponsored.chain_id,
        "userOpHash": sponsored.user_op_hash,
        "op": op_to_json(sponsored.op),
        "validUntil": sponsored.valid_until,
    }
    if sponsored.reorged:
        payload["reorged"] = sponsored.reorged
    return payload


class SettleHandler:
    """The worker's handler for SETTLE_TASK: settle or release, else look again later."""

    def __init__(self, settler: SponsorshipSettler) -> None:
        self.settler = settler

    async def __call__(self, task: Task) -> dict[str, Any]:
        p = task.payload
        sponsored = SponsoredOp(
            str(p["projectId"]),
            int(p["chainId"]),
            str(p["userOpHash"]),
            op_from_json(p["op"]),
            int(p["validUntil"]),
            int(p.get("reorged", 0)),
        )
        if sponsored.chain_id not in self.settler.chains:
            raise PermanentTaskError(f"this service has no chain {sponsored.chain_id}")
        if await self.settler.check(sponsored):
            return {"settled": sponsored.user_op_hash}
        raise RetryTaskError("not mined yet", delay=SETTLE_POLL_SECONDS)


async def release_unsent(
    ledger: SettlementLedger,
    *,
    older_than: datetime,
    at: datetime,
    failing: set[tuple[str, str]] | None = None,
    on_released: ReleasedUnsent | None = None,
    signatures: SignatureBook | None = None,
) -> int:
    """Release the holds of sponsored ops signed before `older_than` (whose windows have
    passed) and never sent through the service: nothing can include them any more. Returns
    how many were released.

    Each hold is released on its own: one that fails (a row the ledger refuses) is logged
    with its project and key and left for the next sweep, and the others are released on
    time. `failing` remembers such holds between sweeps, so each is logged once while it
    keeps failing rather than every minute. `on_released` is told each hold released, after
    its release is committed (a failure to tell is logged, and the release stands).

    With `signatures`, a hold whose signatures may still be mined is kept: their
    `validUntil` has not passed before the newest final block the chain's follower read,
    which then showed no event for them (`signatures_dead`)."""
    released = 0
    for project_id, key in await ledger.unreferenced_holds(SPONSORED, older_than):
        alive = signatures is not None and (
            await signatures_dead(signatures, project_id, key, GRACE_SECONDS) is False
        )
        if alive:
            continue
        try:
            await ledger.release(project_id, key, at)
        except Exception:
            if failing is None or (project_id, key) not in failing:
                log.exception(
                    "cannot release the unsent hold %s of project %s; releasing the others",
                    key,
                    project_id,
                )
            if failing is not None:
                failing.add((project_id, key))
            continue
        released += 1
        if failing is not None:
            failing.discard((project_id, key))
        if on_released is not None:
            try:
                await on_released(project_id, key, UNSENT)
            except Exception:
                log.exception("announcing the release of hold %s of %s failed", key, project_id)
    return released


async def signatures_dead(
    book: SignatureBook, project_id: str, hold_key: str, grace_s: int
) -> bool | None:
    """Whether every signature drawing on the hold is dead: unmined, and its `validUntil`
    (plus `grace_s`) before the timestamp of the newest final block its chain's follower
    read. None when the hold has no recorded signature (none was returned)."""
    signed = await book.for_hold(project_id, hold_key)
    if not signed:
        return None
    finals: dict[int, int] = {}
    for s in signed:
        if s.block_number is not None:
            return False
        if s.chain_id not in finals:
            cursor = await book.cursor(s.chain_id)
            finals[s.chain_id] = cursor.final_time if cursor is not None else 0
        if s.valid_until + grace_s >= finals[s.chain_id]:
            return False
    return True
