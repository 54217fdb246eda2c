"""Names the dashboard shows for what the service records under short technical keys."""

from __future__ import annotations

import re

_WORDS = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)*")
_PLACES = {"rpc": "JSON-RPC", "wallets": "Wallets API"}
_RPC_UNKNOWN = "rpc:unknown"
_SPELLED = {"sla": "SLA", "api": "API", "rpc": "RPC", "eth": "ETH"}


def words(key: str) -> str:
    """`sponsored_user_operation` as "Sponsored user operation" (acronyms in capitals)."""
    parts = [_SPELLED.get(p, p) for p in key.split("_")]
    first = parts[0] if parts[0] in _SPELLED.values() else parts[0].capitalize()
    return " ".join([first, *parts[1:]])


def usage_label(key: str) -> str:
    """A usage breakdown's key in words: an operation kind spelled out, an endpoint named by
    where it was called ("JSON-RPC eth_sendUserOperation", "Notarizations · hash"); method
    names stay as written, since that is how people call them."""
    if key == _RPC_UNKNOWN:
        return "JSON-RPC, methods not served"
    place, colon, rest = key.partition(":")
    if colon and rest:
        return f"{_PLACES.get(place, words(place))} {rest}"
    head, dot, tail = key.partition(".")
    if dot and _WORDS.fullmatch(head) and tail:
        return f"{words(head)} · {tail.replace('_', ' ')}"
    if _WORDS.fullmatch(key):
        return words(key)
    return key
