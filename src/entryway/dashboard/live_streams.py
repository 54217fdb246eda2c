"""How many live-figure streams (server-sent events) this process keeps open: a few per
signed-in session and a bounded number in all, so open browser tabs cannot use up the
server's connections or database. A slot a stream never gave back (its response failed
before it started) is taken back once it is older than the longest a stream lives."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

PER_VIEWER = 4
IN_ALL = 64
STREAM_SECONDS = 600.0  # a stream ends then; the browser's EventSource opens a new one


@dataclass
class StreamSlots:
    per_viewer: int = PER_VIEWER
    in_all: int = IN_ALL
    lifetime: float = STREAM_SECONDS
    clock: Callable[[], float] = time.monotonic
    _open: dict[str, tuple[str, float]] = field(default_factory=dict)  # slot: viewer, since

    def take(self, viewer: str) -> str | None:
        """A slot for one more stream of `viewer`, or None when they or the process are at
        their limit."""
        now = self.clock()
        stale = [s for s, (_, since) in self._open.items() if now - since > self.lifetime + 60]
        for slot in stale:
            del self._open[slot]
        mine = sum(1 for who, _ in self._open.values() if who == viewer)
        if mine >= self.per_viewer or len(self._open) >= self.in_all:
            return None
        slot = uuid.uuid4().hex
        self._open[slot] = (viewer, now)
        return slot

    def give_back(self, slot: str) -> None:
        self._open.pop(slot, None)

    def open_count(self, viewer: str | None = None) -> int:
        return sum(1 for who, _ in self._open.values() if viewer is None or who == viewer)
