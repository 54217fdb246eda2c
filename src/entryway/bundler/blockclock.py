"""When the chain's next block is due, learned from when new heads were seen. Pure.

A bundle sent just before a block is mined carries every op validated since the previous
block, at no cost in latency: an op cannot be mined before that block anyway. On a chain
that mines at a steady interval (anvil's `--block-time`, Polygon, Base) the auto bundler
therefore waits for a deadline shortly before the predicted block, and so sends one full
bundle per block instead of several small ones (each bundle pays the 21,000 gas of its
transaction and the EntryPoint's own overhead once, whatever the number of ops in it).
Where blocks come irregularly (a devnet that mines on demand) there is no prediction, and
the bundler falls back to its fixed interval.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass
from itertools import pairwise

MIN_GAPS = 3  # observed one-block gaps needed before predicting
SEED_GAPS = 4  # equal gaps between the latest blocks' timestamps that give an interval
MAX_JITTER = 0.25  # gaps further than this fraction from their median: no steady interval
HORIZON = 24  # blocks ahead of the last arrival a prediction may reach


@dataclass(frozen=True, slots=True)
class NextBlock:
    number: int
    due_at: float  # on the clock the observations were made with


class BlockClock:
    """`precise_s`: a new block counts as seen arriving only if the read before it was at
    most this long before (an idle bundler polls slowly, and a block found after a long gap
    could have come at any time in it)."""

    def __init__(self, window: int = 12, precise_s: float = 0.25) -> None:
        self.precise_s = precise_s
        self._seeded: float | None = None
        self._latest: int | None = None
        self._read_at: float | None = None
        # (number, when first seen) of blocks seen arriving: the first head read only says
        # the block existed, not when it came, so it is not one of them.
        self._arrivals: deque[tuple[int, float]] = deque(maxlen=window)

    def observe(self, number: int, at: float) -> None:
        """A head read at `at` said the latest block is `number`."""
        precise = self._read_at is not None and at - self._read_at <= self.precise_s
        if self._latest is not None and number < self._latest:  # a reorg: start over
            self._arrivals.clear()
        elif self._latest is not None and number > self._latest and precise:
            self._arrivals.append((number, at))
        self._latest = number
        self._read_at = at

    @property
    def latest(self) -> int | None:
        """The latest block number read."""
        return self._latest

    def seed(self, timestamps: list[int]) -> None:
        """Recent blocks' timestamps, oldest first: if the latest of them are evenly spaced
        (whole seconds apart, as on a chain with 1 s or 2 s blocks; the last SEED_GAPS gaps
        equal, whatever came before), that spacing is the interval until enough
        arrivals have been seen; only the phase then waits for one new block."""
        gaps = [t2 - t1 for t1, t2 in pairwise(timestamps)]
        if len(gaps) < SEED_GAPS or gaps[-1] <= 0:
            return
        if all(gap == gaps[-1] for gap in gaps[-SEED_GAPS:]):
            self._seeded = float(gaps[-1])

    def interval(self) -> float | None:
        """The steady block interval, or None when blocks do not come at one. A few late
        reads (a busy event loop) are tolerated: most gaps must agree with their median."""
        gaps = [t2 - t1 for (n1, t1), (n2, t2) in pairwise(self._arrivals) if n2 - n1 == 1]
        if len(gaps) < MIN_GAPS:
            return self._seeded if self._arrivals else None
        median = statistics.median(gaps)
        steady = sum(abs(g - median) <= MAX_JITTER * median for g in gaps)
        if median <= 0 or steady * 3 < len(gaps) * 2:
            return None
        return median

    def next_block(self, now: float) -> NextBlock | None:
        """The first block expected after `now`, or None without a steady interval.

        Each head was mined at the latest when it was seen; so, the interval being steady,
        block n + k at the latest `k` intervals after that. The earliest of these bounds over
        the window is the prediction: the more heads seen, the closer it gets to the truth,
        whatever the polling period.
        """
        interval = self.interval()
        if interval is None:
            return None
        number, seen_at = self._arrivals[-1]
        target = number + max(1, int((now - seen_at) // interval) + 1)
        if target - number > HORIZON:  # too long unwatched: the phase may have drifted
            return None
        due = min(at + (target - n) * interval for n, at in self._arrivals)
        while due <= now:  # a block late beyond the bounds: expect the one after
            target += 1
            due += interval
        return NextBlock(target, due)
