"""When a chain's node endpoints go down and come back, logged once each way.

A node that stops answering fails every call made to it: logging each failure (or each
retry) would bury the one fact an operator needs under hundreds of lines. The tracker
turns a run of failures into two lines: the outage when an endpoint first fails, and its
recovery, with how long it lasted, when it answers again. Neither line carries the
endpoint's URL (hosted providers put their API key in it): the chain and the endpoint's
position in the configured list say which one it is.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger("entryway.chain")


class NodeOutages:
    """The endpoints of one chain's node that are down, and since when (on `clock`)."""

    def __init__(self, chain_id: int | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.chain = f"chain {chain_id}" if chain_id is not None else "the chain"
        self._clock = clock
        self._down_since: dict[int, float] = {}  # endpoint index (from 0) -> outage start

    def failed(self, index: int, detail: str) -> None:
        """Endpoint `index` gave no answer; `detail` says how, without its URL. Logged only
        if it was answering until now."""
        if index in self._down_since:
            return
        self._down_since[index] = self._clock()
        log.warning(
            "node of %s unreachable at endpoint #%d (%s); logged again when it answers",
            self.chain,
            index + 1,
            detail,
        )

    def answered(self, index: int) -> None:
        """Endpoint `index` answered; ends its outage, if it had one."""
        since = self._down_since.pop(index, None)
        if since is None:
            return
        log.info(
            "node of %s reachable again after %.1f s (endpoint #%d)",
            self.chain,
            self._clock() - since,
            index + 1,
        )

    def is_down(self, index: int) -> bool:
        return index in self._down_since
