"""What a node's provider takes in one request, configured and then learned from its
refusals: calls per JSON-RPC batch (`BatchCap`) and blocks per `eth_getLogs` (`LogRange`).

Hosted plans cap batches (ten calls on some, a thousand on others) and some free tiers
refuse them outright; anvil takes any size. A refusal comes as one error object for the
whole batch, or as the same error for each call in it, and says nothing of which calls ran
(none, on every provider seen), so a batch is resent only when every call in it is a read.
Each refusal halves the cap (or takes the provider's own number, when its message gives a
smaller one) down to 1, where calls go one by one, unbatched: slower, never wrong.

Providers cap `eth_getLogs` by blocks (2,000 to 10,000 on hosted plans, 50,000 on some
public endpoints) or by results (10,000 logs), and say so in words, not in a code of their
own (the codes vary: -32005, -32602, -32000). A refusal in those words halves the range,
down to one block, and the smaller range is kept: a node that refused a range once refuses
it again.
"""

from __future__ import annotations

import logging
import re
from typing import Any

log = logging.getLogger("entryway.chain")

_BATCH_WORDS = re.compile(r"batch", re.IGNORECASE)
# How providers word a log query over their caps (Alchemy, Infura, QuickNode, Ankr, public
# endpoints of Base and Polygon, geth's own "query returned more than 10000 results").
_RANGE_WORDS = re.compile(
    r"block range|range (is )?too|range limit|more than \d+ (results|logs)|response size"
    r"|exceed(s|ed)? (the )?max(imum)?|too many (results|logs|blocks)|limited to",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"\d+")


class BatchCap:
    """The most calls sent in one batch; None while no cap is known."""

    def __init__(self, limit: int | None = None) -> None:
        if limit is not None and limit < 1:
            raise ValueError("a batch cap is at least 1 (calls sent one by one)")
        self.limit = limit

    def size(self, remaining: int) -> int:
        """How many of `remaining` calls go in the next batch."""
        return remaining if self.limit is None else min(self.limit, remaining)

    def refused(self, size: int, message: str) -> int:
        """The node refused a batch of `size` calls saying `message`: the smaller cap used
        from now on, said once in the log."""
        named = [int(n) for n in _NUMBER.findall(message) if 0 < int(n) < size]
        limit = max(1, min(named) if named else size // 2)
        if self.limit is None or limit < self.limit:
            self.limit = limit
            log.info(
                "the chain's node refused a JSON-RPC batch of %d calls (%s); batches of at "
                "most %d from now on%s",
                size,
                message,
                limit,
                " (calls sent one by one)" if limit == 1 else "",
            )
        return self.limit


def refusal(answers: Any, size: int) -> dict[str, Any] | None:
    """The error object by which a node refused a whole batch of `size` calls, if it did:
    one error for the batch, or an error about batches for every call in it."""
    if isinstance(answers, dict) and isinstance(answers.get("error"), dict):
        return dict(answers["error"])
    if not isinstance(answers, list) or len(answers) < size or not answers:
        return None
    errors = [
        a["error"] for a in answers if isinstance(a, dict) and isinstance(a.get("error"), dict)
    ]
    if len(errors) == len(answers) and all(
        _BATCH_WORDS.search(str(e.get("message", ""))) for e in errors
    ):
        return dict(errors[0])
    return None


def is_range_refusal(message: str) -> bool:
    """Whether an eth_getLogs error says the query covered too many blocks or logs."""
    return bool(_RANGE_WORDS.search(message)) and "rate" not in message.lower()


class LogRange:
    """The most blocks one eth_getLogs covers, both ends counted; None while no cap is
    known."""

    def __init__(self, limit: int | None = None) -> None:
        if limit is not None and limit < 1:
            raise ValueError("a log range covers at least one block")
        self.limit = limit

    def size(self, blocks: int) -> int:
        """How many of `blocks` the next query covers."""
        return blocks if self.limit is None else min(self.limit, blocks)

    def refused(self, blocks: int, message: str) -> int:
        """The node refused a query over `blocks` blocks saying `message`: the smaller range
        used from now on, said once in the log."""
        limit = max(1, blocks // 2)
        if self.limit is None or limit < self.limit:
            self.limit = limit
            log.info(
                "the chain's node refused eth_getLogs over %d blocks (%s); at most %d blocks "
                "a query from now on",
                blocks,
                message,
                limit,
            )
        return self.limit
