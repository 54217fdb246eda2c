"""When the auto bundler sends its next bundle. Pure: the caller supplies the time.

On a chain with a steady block interval: once per block, at a deadline shortly before the
block is due (see blockclock.py), so that one bundle carries every op validated since the
last one; ops validated just after the deadline, while a bundle can still make the block,
go in a small follow-up rather than wait a block. The lead before the block covers the head
polling period, twice the time the last bundles took to build and send, and a margin that
grows with the interval (a slow chain's RPC and mempool are rarely faster than a devnet's).
A follow-up may go out until the head polling period plus twice the time the last
follow-ups took remain (at most what a main bundle takes): a few stragglers are checked and
sent far faster than the block's main bundle, built while the node was still busy
validating the burst they came in.
Without a steady interval: every `interval_s`, as a plain periodic bundler.
"""

from __future__ import annotations

from entryway.bundler.blockclock import BlockClock

FIRST_BUILD_S = 0.1  # assumed time to build and send a bundle until one has been measured


class BundleSchedule:
    def __init__(self, clock: BlockClock, interval_s: float, head_poll_s: float) -> None:
        self.clock = clock
        self.interval_s = interval_s
        self.head_poll_s = head_poll_s
        self._build_s = FIRST_BUILD_S
        self._follow_up_s: float | None = None  # the same for follow-ups, once one was sent
        self._last_sent_at: float | None = None
        self._sent_for_block: int | None = None

    def lead_s(self, block_interval_s: float) -> float:
        margin = 0.05 + 0.1 * block_interval_s
        return min(block_interval_s / 2, self.head_poll_s + 2 * self._build_s + margin)

    def due(self, now: float) -> bool:
        """Whether a bundle should be sent now (the mempool holding ops)."""
        block = self.clock.next_block(now)
        if block is None:
            return self._last_sent_at is None or now - self._last_sent_at >= self.interval_s
        if self._sent_for_block is not None and block.number <= self._sent_for_block:
            # This block has its bundle: ops validated since go in a follow-up only while it
            # can still make the block (the margin after the deadline); later, next block.
            return block.due_at - now >= self.head_poll_s + 2 * self._follow_up_build_s()
        if block.due_at - now < self.head_poll_s:
            # Too late for this block, or it is mined and the watcher has not read it yet:
            # either way the ops go with the next block's bundle.
            return False
        return now >= self._deadline(block.due_at)

    def deadline(self, now: float) -> float | None:
        """When the next block's main bundle goes out (monotonic seconds); None without a
        steady block interval."""
        block = self.clock.next_block(now)
        return None if block is None else self._deadline(block.due_at)

    def _deadline(self, due_at: float) -> float:
        return due_at - self.lead_s(self.clock.interval() or self.interval_s)

    def _follow_up_build_s(self) -> float:
        """How long a follow-up takes to build and send: as the last ones took, never longer
        than a main bundle (a follow-up slowed by a node's hiccup is not repeated often, and
        its measure would otherwise shut follow-ups out for good)."""
        if self._follow_up_s is None:
            return self._build_s
        return min(self._follow_up_s, self._build_s)

    def sent(self, started: float, finished: float, *, scheduled: bool = True) -> None:
        """A bundle built from `started` went out at `finished`: at the schedule's deadline,
        or (not `scheduled`) early, because a full bundle's worth of ops waited; the ops
        left after an early one still go at the deadline."""
        took = finished - started
        if not scheduled:
            self._build_s = 0.7 * self._build_s + 0.3 * took
            return
        self._last_sent_at = started
        block = self.clock.next_block(started)
        number = block.number if block is not None else None
        if number is not None and number == self._sent_for_block:  # a follow-up
            previous = took if self._follow_up_s is None else self._follow_up_s
            self._follow_up_s = 0.7 * previous + 0.3 * took
        else:
            self._build_s = 0.7 * self._build_s + 0.3 * took
        self._sent_for_block = number
