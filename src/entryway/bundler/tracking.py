"""What became of each op this bundler accepted, kept in bounded memory.

The map answers "pending" and "submitted" without asking the node (clients poll those hard),
notices a reorg that took an op's block, and remembers why an op was dropped. A mined op
this bundler bundled keeps its body here, so that a reorg removing its block sends it to the
mempool again; the retention below covers the reorg depths of the chains served. Past it
an included op's receipt, status and body are read from the chain's UserOperationEvent
logs, so old final entries can go.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator, MutableMapping
from dataclasses import dataclass

from entryway.bundler.states import MINED, OpStatus, Tracked

FINAL = frozenset({OpStatus.INCLUDED, OpStatus.FAILED, OpStatus.DROPPED})


@dataclass(frozen=True, slots=True)
class TrackingLimits:
    # A final op is remembered this long after its last change: past any reorg depth on the
    # chains served, after which the chain's logs alone answer for it.
    final_retention_s: float = 3_600.0
    # The most entries kept; above it the oldest final ones go first. Well above the
    # mempool's size, so ops still pending or in flight are never the ones to go.
    max_entries: int = 50_000


class TrackedOps(MutableMapping[bytes, Tracked]):
    """A map of op hash -> Tracked that forgets final ops once they are old, and keeps at
    most `max_entries`: the oldest final entries go first, live ones only if nothing else is
    left. Live and final entries are kept apart, each in the order of its last change, so
    finding what to forget costs only the entries forgotten."""

    def __init__(self, limits: TrackingLimits, clock: Callable[[], float] = time.time) -> None:
        self.limits = limits
        self._clock = clock  # the clock Tracked.updated_at is read on
        # OrderedDict, not dict: it drops its oldest entry in O(1) however many went before.
        self._live: OrderedDict[bytes, Tracked] = OrderedDict()
        self._final: OrderedDict[bytes, Tracked] = OrderedDict()

    def __getitem__(self, op_hash: bytes) -> Tracked:
        found = self._live.get(op_hash) or self._final.get(op_hash)
        if found is None:
            raise KeyError(op_hash)
        return found

    def __setitem__(self, op_hash: bytes, tracked: Tracked) -> None:
        self._live.pop(op_hash, None)
        self._final.pop(op_hash, None)
        (self._final if tracked.status in FINAL else self._live)[op_hash] = tracked
        self._forget()

    def __delitem__(self, op_hash: bytes) -> None:
        if self._live.pop(op_hash, None) is None and self._final.pop(op_hash, None) is None:
            raise KeyError(op_hash)

    def __iter__(self) -> Iterator[bytes]:
        yield from list(self._live)
        yield from list(self._final)

    def __len__(self) -> int:
        return len(self._live) + len(self._final)

    def mined_in(self, block_numbers: Collection[int]) -> list[bytes]:
        """The ops remembered as mined in these blocks with their bodies (re-includable)."""
        return [
            op_hash
            for op_hash, tracked in self._final.items()
            if tracked.status in MINED
            and tracked.op is not None
            and tracked.block_number in block_numbers
        ]

    def clear(self) -> None:
        self._live.clear()
        self._final.clear()

    def _forget(self) -> None:
        cutoff = self._clock() - self.limits.final_retention_s
        while self._final and self._final[next(iter(self._final))].updated_at <= cutoff:
            self._final.popitem(last=False)
        for oldest_first in (self._final, self._live):
            while len(self) > self.limits.max_entries and oldest_first:
                oldest_first.popitem(last=False)
