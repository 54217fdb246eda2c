"""Telling a method or block tag the node does not serve from any other error.

Nodes differ in what they serve beyond the core `eth_*` calls: `eth_maxPriorityFeePerGas`
is geth's and not every provider's, `eth_feeHistory` is missing from some public endpoints,
and the `safe` and `finalized` tags are refused by nodes of chains (or clients) that never
had them. The node client falls back where a sensible answer exists (`EthClient`), and
says so once per client and feature in the log; any other error still raises.
"""

from __future__ import annotations

import logging
import re

log = logging.getLogger("entryway.chain")

METHOD_NOT_FOUND = -32601
# How nodes and providers word it: geth "the method X does not exist/is not available",
# "method not found", "unsupported method", "not implemented"; for tags, "unknown block",
# "invalid block tag", "invalid block number".
_UNSERVED = re.compile(
    r"does not exist|not available|method not found|not supported|unsupported|not implemented"
    r"|unknown block|block not found|invalid block (tag|number)",
    re.IGNORECASE,
)


def is_unserved(code: int, message: str) -> bool:
    """Whether a JSON-RPC error says the method (or a block tag) is not served here."""
    return code == METHOD_NOT_FOUND or bool(_UNSERVED.search(message))


class FallbackNotices:
    """One log line per feature the node does not serve, the first time it is missed."""

    def __init__(self) -> None:
        self._said: set[str] = set()

    def say(self, feature: str, instead: str) -> None:
        if feature not in self._said:
            self._said.add(feature)
            log.info("the chain's node does not serve %s; %s instead", feature, instead)
