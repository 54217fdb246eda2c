"""Auto mode: when to send bundles (blockclock.py, schedule.py) and the loops that do it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING

from entryway.bundler.blockclock import BlockClock
from entryway.bundler.schedule import BundleSchedule
from entryway.bundler.states import BundlingMode
from entryway.chain.rpc import RpcTransportError
from entryway.waiting import woken

if TYPE_CHECKING:
    from entryway.bundler.service import Bundler

log = logging.getLogger("entryway.bundler")
AUTO_TICK_S = 0.05  # how often auto mode asks the schedule
SEED_BLOCKS = 8  # recent blocks whose timestamps may give the block interval at start
SEED_TRIES = 12  # new heads whose recent timestamps are read while the interval is unknown
IDLE_HEAD_POLL_S = 2.0  # head reads when no op came for ACTIVE_S (hosted RPCs bill per call)
ACTIVE_S = 30.0


class AutoBundler:
    def __init__(self, bundler: Bundler) -> None:
        self.bundler = bundler
        # The bundlers it sends for: this one, then the chain's other EntryPoints' (`join`).
        # One schedule for them all, so each block's bundles are built side by side.
        self.group: list[Bundler] = [bundler]
        config = bundler.config
        self.clock = BlockClock(precise_s=2.5 * config.head_poll_s)
        self.schedule = BundleSchedule(
            self.clock, config.auto_bundle_interval_s, config.head_poll_s
        )
        self.wake = asyncio.Event()  # set when a full bundle's worth of ops waits
        self._last_op_at = time.monotonic()  # watch closely at first: the clock learns the chain
        self._op_arrived = asyncio.Event()

    def join(self, other: Bundler) -> None:
        """Send `other`'s bundles too, on this schedule (another EntryPoint on the chain):
        its ops wake this loop, and it runs no loops of its own."""
        self.group.append(other)
        other.auto = self

    def _waiting(self) -> int:
        return sum(len(b.mempool) for b in self.group)

    def op_arrived(self) -> None:
        self._last_op_at = time.monotonic()
        self._op_arrived.set()

    async def bundle_loop(self) -> None:
        """Auto mode: a bundle when the schedule says (once per block, just before it is due,
        or every interval), or at once when a full bundle's worth of ops waits."""
        tick = min(AUTO_TICK_S, self.bundler.config.auto_bundle_interval_s)
        while True:
            await woken(self.wake, tick)
            full = self.wake.is_set()
            self.wake.clear()
            if self.bundler.mode is not BundlingMode.AUTO or not self._waiting():
                continue
            started = time.monotonic()
            if not full and not self.schedule.due(started):
                continue
            waiting = [b for b in self.group if len(b.mempool)]
            results = await asyncio.gather(
                *(b.fill_block() for b in waiting), return_exceptions=True
            )
            for result in results:
                if isinstance(result, RpcTransportError):
                    # The node client logs the outage once, and its end; not each tick's.
                    log.debug("bundling skipped: %s", result)
                elif isinstance(result, Exception):
                    log.error("bundling failed", exc_info=result)
                elif isinstance(result, BaseException):
                    raise result
            if any(isinstance(r, str) for r in results):
                self.schedule.sent(started, time.monotonic(), scheduled=not full)

    async def watch_head_loop(self) -> None:
        """Feeds the block clock: recent blocks' spacing, then when each new block number
        was first seen; every head_poll_s while ops come, every IDLE_HEAD_POLL_S when quiet.
        Until the clock knows the interval, each new head's recent blocks are read again
        (SEED_TRIES times at most): a devnet that mined its set-up on demand and then at
        a steady interval is learnt from the timestamps, not only from the arrivals."""
        await self._seed()
        tries = SEED_TRIES
        while True:
            quiet = not self._waiting() and time.monotonic() - self._last_op_at > ACTIVE_S
            # An op arriving ends a quiet spell.
            await woken(
                self._op_arrived, IDLE_HEAD_POLL_S if quiet else self.bundler.config.head_poll_s
            )
            self._op_arrived.clear()
            if self.bundler.mode is not BundlingMode.AUTO:
                continue
            try:
                number = await self.bundler.eth.block_number()
            except Exception as exc:  # the node may be down for a while; keep watching
                log.debug("head poll failed: %s", exc)
                continue
            new_head = self.clock.latest is not None and number > self.clock.latest
            self.clock.observe(number, time.monotonic())
            if new_head and tries and self.clock.interval() is None:
                tries -= 1
                await self._seed(number)

    async def _seed(self, latest: int | None = None) -> None:
        with contextlib.suppress(Exception):  # without a seed the clock learns from arrivals
            if latest is None:
                latest = await self.bundler.eth.block_number()
            numbers = range(max(latest - SEED_BLOCKS, 0), latest + 1)
            blocks = await self.bundler.eth.rpc.batch(
                [("eth_getBlockByNumber", [hex(n), False]) for n in numbers]
            )
            self.clock.seed([int(b["timestamp"], 16) for b in blocks])
