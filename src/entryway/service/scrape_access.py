"""Who may read an operator endpoint's details: the rule of every process's /metrics.

A scraper on the same host may (a loopback client, and no proxy's forwarding header: a
reverse proxy on the host would otherwise make every visitor look local), as may anyone
presenting one of the given bearer tokens (the metrics token, the operator token)."""

from __future__ import annotations

import hmac
from collections.abc import Iterable

from starlette.requests import Request

from entryway.service.problems import Problem

_LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})
_FORWARDING_HEADERS = ("forwarded", "x-forwarded-for", "x-real-ip")


def may_scrape(request: Request, tokens: Iterable[str | None]) -> bool:
    return from_this_host(request) or bearer_matches(request, tokens)


def bearer_matches(request: Request, tokens: Iterable[str | None]) -> bool:
    header = request.headers.get("authorization", "")
    if not header.lower().startswith("bearer "):
        return False
    presented = header[7:].strip().encode()
    return any(t and hmac.compare_digest(presented, t.encode()) for t in tokens)


def from_this_host(request: Request) -> bool:
    if request.client is None or request.client.host not in _LOOPBACK:
        return False
    return not any(h in request.headers for h in _FORWARDING_HEADERS)


def metrics_token_required() -> Problem:
    return Problem(
        401,
        "metrics_token_required",
        "Metrics token required",
        "scrape from this host, or send Authorization: Bearer <metrics token>",
    )
