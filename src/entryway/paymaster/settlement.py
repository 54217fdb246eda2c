"""Settling sponsorship holds: an op our paymaster signed was charged its estimate (a hold);
when its receipt appears the hold settles on the receipt's `actualGasCost`; when its validity
window has passed without a receipt, or the bundler reports it dropped, the hold is released.

`SponsorshipSettler` follows the ops sent through the service, in process; each check is
idempotent (settling or releasing twice changes nothing), so following an op again after a
restart, or from another process, is safe."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from entryway.domain.pricebook import PriceBook
from entryway.domain.userop import UserOperation
from entryway.paymaster.costs import release_sponsorship, settle_sponsorship
from entryway.paymaster.ports import SponsorshipLedger

log = logging.getLogger(__name__)
GRACE_SECONDS = 120  # after validUntil, before an unmined op's hold is released
Receipt = Callable[[str], Awaitable[dict[str, Any] | None]]
Settled = Callable[["SponsoredOp", dict[str, Any]], Awaitable[None]]  # the op and its receipt
Status = Callable[[str], Awaitable[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class SponsoredOp:
    project_id: str
    chain_id: int
    user_op_hash: str
    op: UserOperation
    valid_until: int  # unix seconds, from the paymaster data


@dataclass(frozen=True, slots=True)
class ChainLookups:
    receipt: Receipt  # eth_getUserOperationReceipt
    status: Status  # entryway_getUserOperationStatus


class SponsorshipSettler:
    def __init__(
        self,
        ledger: SponsorshipLedger,
        prices: PriceBook,
        chains: Mapping[int, ChainLookups],
        *,
        poll_s: float = 1.0,
        clock: Callable[[], float] = time.time,
        on_settled: Settled | None = None,
    ) -> None:
        self.on_settled = on_settled
        self.ledger = ledger
        self.prices = prices
        self.chains = chains
        self.poll_s = poll_s
        self.clock = clock
        self.following: dict[str, SponsoredOp] = {}
        self._task: asyncio.Task[None] | None = None

    def follow(self, sponsored: SponsoredOp) -> None:
        self.following[sponsored.user_op_hash] = sponsored

    async def check(self, sponsored: SponsoredOp) -> bool:
        """Settle or release if the op's fate is known; True when done with it."""
        lookups = self.chains[sponsored.chain_id]
        now = datetime.now(UTC)
        receipt = await lookups.receipt(sponsored.user_op_hash)
        if receipt is not None:
            await settle_sponsorship(
                self.ledger,
                self.prices,
                project_id=sponsored.project_id,
                chain_id=sponsored.chain_id,
                op=sponsored.op,
                actual_gas_cost_wei=int(receipt["actualGasCost"], 16),
                at=now,
            )
            if self.on_settled is not None:
                await self.on_settled(sponsored, receipt)
            return True
        status = (await lookups.status(sponsored.user_op_hash)).get("status")
        expired = self.clock() > sponsored.valid_until + GRACE_SECONDS
        if status == "dropped" or (expired and status in ("not_found", "failed", "dropped")):
            await release_sponsorship(
                self.ledger,
                project_id=sponsored.project_id,
                chain_id=sponsored.chain_id,
                op=sponsored.op,
                at=now,
            )
            return True
        return False

    async def run_once(self) -> None:
        for op_hash, sponsored in list(self.following.items()):
            try:
                if await self.check(sponsored):
                    self.following.pop(op_hash, None)
            except Exception:
                log.exception("settling sponsorship of %s failed; retrying", op_hash)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._forever())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _forever(self) -> None:
        while True:
            await asyncio.sleep(self.poll_s)
            await self.run_once()
