"""Bounds on values that come from outside (API bodies and queries, JSON-RPC parameters,
policy documents), shared by the API schemas and the domain's own parsers. Pure.

The limits are refused where a value enters, never clamped: a number the database cannot
store, a date arithmetic cannot move, or text that hides characters fails with a message
naming the bound, before anything is written.
"""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime

# The database stores credits, gas and chain ids as signed 64-bit integers. One amount may
# use a quarter of that range, so a few of them summed (a cycle's overage, a usage report)
# still fit.
MAX_DB_INT = 2**63 - 1
MAX_CREDITS = 2**62
# JavaScript clients read JSON numbers as doubles: chain ids stay exact up to 2^53.
MAX_CHAIN_ID = 2**53

# Dates from outside: from the year 2000 (before any chain this service serves) to the
# year 9999 (a window may still be moved by a month or a year without overflowing).
EARLIEST_MOMENT = datetime(2000, 1, 1, tzinfo=UTC)
LATEST_MOMENT = datetime(9999, 1, 1, tzinfo=UTC)

# Characters text from outside may not hold: they hide or reorder what a reader sees
# (bidirectional overrides), end a line inside a single-line field, or are not characters
# at all (lone surrogates, which no database encoding stores).
_HIDDEN = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_LINE_BREAKS = frozenset("\u2028\u2029")
_MULTILINE_CONTROLS = frozenset("\n\t")


class BoundError(ValueError):
    """A value outside the bounds the service accepts; the message names the bound."""


def utc_moment(moment: datetime, where: str = "date") -> datetime:
    """`moment` in UTC (a naive one is read as UTC), refused outside the accepted years."""
    try:
        aware = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except OverflowError:  # an offset moved it past year 1 or 9999
        aware = None
    if aware is None or not EARLIEST_MOMENT <= aware < LATEST_MOMENT:
        raise BoundError(
            f"{where} must be from {EARLIEST_MOMENT:%Y-%m-%d} to before "
            f"{LATEST_MOMENT:%Y-%m-%d} (UTC), not {moment.isoformat()}"
        )
    return aware


def unprintable(text: str, *, multiline: bool = False) -> str | None:
    """The first character `text` may not hold, as U+XXXX, or None when it is clean.
    Multi-line text may hold line feeds and tabs; no text holds other control characters."""
    for char in text:
        if multiline and char in _MULTILINE_CONTROLS:
            continue
        category = unicodedata.category(char)
        if category in ("Cc", "Cs") or char in _HIDDEN or char in _LINE_BREAKS:
            return f"U+{ord(char):04X}"
    return None


def check_text(text: str, where: str, *, max_length: int, multiline: bool = False) -> str:
    """`text` unchanged when it is printable and at most `max_length` characters long."""
    if len(text) > max_length:
        raise BoundError(f"{where} is longer than {max_length} characters")
    bad = unprintable(text, multiline=multiline)
    if bad is not None:
        raise BoundError(f"{where} holds a control or invisible character ({bad})")
    return text
