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

if TYPE_CHECKING:
    from entryway.bundler.service import Bundler

log = logging.getLogger("entryway.bundler")
AUTO_TICK_S = 0.05  # how often auto mode asks the schedule
SEED_BLOCKS = 8  # recent blocks whose timestamps may give the block interval at start
IDLE_HEAD_POLL_S = 2.0  # head reads when no op came for ACTIVE_S (hosted RPCs bill per call)
ACTIVE_S = 30.0


class AutoBundler:
    def __init__(self, bundler: Bundler) -> None:
        self.bundler = bundler
        config = bundler.config
        self.clock = BlockClock(precise_s=2.5 * config.head_poll_s)
        self.schedule = BundleSchedule(
            self.clock, config.auto_bundle_interval_s, config.head_poll_s
        )
        self.wake = asyncio.Event()  # set when a full bundle's worth of ops waits
        self._last_op_at = time.monotonic()  # watch closely at first: the clock learns the chain
        self._op_arrived = asyncio.Event()

    def op_arrived(self) -> None:
        self._last_op_at = time.monotonic()
        self._op_arrived.set()

    async def bundle_loop(self) -> None:
        """Auto mode: a bundle when the schedule says (once per block, just before it is due,
        or every interval), or at once when a full bundle's worth of ops waits."""
        tick = min(AUTO_TICK_S, self.bundler.config.auto_bundle_interval_s)
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), tick)
            full = self.wake.is_set()
            self.wake.clear()
            if self.bundler.mode is not BundlingMode.AUTO or not len(self.bundler.mempool):
                continue
            started = time.monotonic()
            if not full and not self.schedule.due(started):
                continue
            try:
                if await self.bundler.bundle_once(wait=False) is not None:
                    self.schedule.sent(started, time.monotonic(), scheduled=not full)
            except RpcTransportError as exc:
                # The node client logs the outage once, and its end; not each tick's failure.
                log.debug("bundling skipped: %s", exc)
            except Exception:
                log.exception("bundling failed")

    async def watch_head_loop(self) -> None:
        """Feeds the block clock: recent blocks' spacing, then when each new block number
        was first seen; every head_poll_s while ops come, every IDLE_HEAD_POLL_S when quiet."""
        with contextlib.suppress(Exception):  # without a seed the clock learns from arrivals
            latest = await self.bundler.eth.block_number()
            numbers = range(max(latest - SEED_BLOCKS, 0), latest + 1)
            blocks = await self.bundler.eth.rpc.batch(
                [("eth_getBlockByNumber", [hex(n), False]) for n in numbers]
            )
            self.clock.seed([int(b["timestamp"], 16) for b in blocks])
        while True:
            quiet = not len(self.bundler.mempool) and time.monotonic() - self._last_op_at > ACTIVE_S
            with contextlib.suppress(TimeoutError):  # an op arriving ends a quiet spell
                await asyncio.wait_for(
                    self._op_arrived.wait(),
                    IDLE_HEAD_POLL_S if quiet else self.bundler.config.head_poll_s,
                )
            self._op_arrived.clear()
            if self.bundler.mode is not BundlingMode.AUTO:
                continue
            try:
                number = await self.bundler.eth.block_number()
            except Exception as exc:  # the node may be down for a while; keep watching
                log.debug("head poll failed: %s", exc)
                continue
            self.clock.observe(number, time.monotonic())
