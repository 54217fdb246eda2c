"""Python's cyclic garbage collector, set for a long-running service.

By default CPython collects its youngest generation every 700 new container objects, and
each collection of an older generation walks every live object. A bundler decoding a
validation trace makes tens of thousands of small objects (one dict and one stack list per
EVM step) that die at once; with a service's heap behind them (ABIs, the mempool, the
framework), collection took about two thirds of the time of decoding such a trace
(6.2 ms against 2.0 ms for a 460 kB trace, measured in `docs/benchmarks.md`). Objects made
while starting live as long as the process: they are moved out of the collector's sight,
and the young generation is collected less often. Memory freed by reference counting, which
is nearly all of it, is unaffected; only cycles wait longer to be found.
"""

from __future__ import annotations

import gc

# Allocations between collections of the youngest generation, and how many of those between
# collections of the next (then of the oldest).
YOUNG_THRESHOLD = 100_000
MIDDLE_THRESHOLD = 50
OLD_THRESHOLD = 100


def settle_collector() -> None:
    """Call once the process has started, before it serves: what exists now is kept for the
    process's life, so later collections skip it."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)
