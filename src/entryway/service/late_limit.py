"""A rate-limit decision that arrives while the call runs.

An `eth_sendUserOperation` is validated on the node before anything is written, and that
takes far longer than counting its two windows (the project's requests, its heavy calls) in
Redis. So when the project had room at its last decision (`RateLimiter.reserve_room`), the
count is started as the key is checked and the op's validation goes on meanwhile; the
decision is waited for before the op's first effect (its accounting and intake row, in the
bundler's `before_mempool`) and before the answer. A call the windows refuse is answered as if
it had been refused first: the 429 problem for the project's window, the JSON-RPC "limit
exceeded" error for the heavy window, nothing written, nothing charged. Only the validation's
work is spent on it, and the room's view (each such call takes one off it) bounds how many
calls of a project over its limit can be validated before it is told so.

A project with no recent decision, or near its limit, waits for its decision first as every
other request does (`auth.current_caller`)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from starlette.requests import Request

from entryway.service.problems import Problem
from entryway.service.ratelimit import Decision, RateLimiter
from entryway.storage.store import Caller

log = logging.getLogger("entryway.service.late_limit")

# On the request's state: set (by `json_rpc_shortcut`) when the request is one call that may
# run before its decision; then the `LateDecision` itself.
MAY_DECIDE_LATE = "may_decide_late"
LATE_DECISION = "late_decision"
HEAVY_DECISION = "heavy_decision"  # the heavy window's decision, for the route (`auth`)


class RefusedLate(Exception):  # noqa: N818 - a refusal, raised to stop the call's effects
    """The call's windows refused it; raised where its first effect would start."""


def apply_decision(
    request: Request, caller: Caller, decision: Decision, heavy: Decision | None = None
) -> None:
    """The decision where the request's handling reads it (its headers; the heavy window's
    decision, for the route); 429 when the project's window refused the request."""
    request.state.rate_limit_headers = decision.headers()
    setattr(request.state, HEAVY_DECISION, heavy)
    if not decision.allowed:
        raise Problem(
            429,
            "rate_limited",
            "Rate limit exceeded",
            f"the {caller.plan.value} plan allows {decision.limit} requests per window "
            f"per project, all its keys together; retry after {decision.reset_seconds} s",
            headers=decision.headers(),
        )


class LateDecision:
    """A heavy call's two windows, counted while it runs."""

    def __init__(self, limiter: RateLimiter, caller: Caller) -> None:
        self.caller = caller
        self._counting = asyncio.ensure_future(
            limiter.hit_with_heavy(caller.plan, caller.project_id)
        )
        self._counting.add_done_callback(_retrieved)
        self._settled = False

    async def admits(self) -> bool:
        """Whether both windows counted the call: its effects may go ahead. False when they
        refused it or the count failed (`settle` says which)."""
        try:
            first, heavy = await asyncio.shield(self._counting)
        except Exception:
            return False
        return first.allowed and heavy is not None and heavy.allowed

    async def settle(self, request: Request) -> None:
        """Wait for the decision and apply it (`apply_decision`), once: raises the project
        window's 429, or the count's own failure (Redis unreachable), as a decision taken
        first would have. The heavy window's refusal is the route's to answer."""
        if self._settled:
            return
        self._settled = True
        first, heavy = await asyncio.shield(self._counting)
        apply_decision(request, self.caller, first, heavy)


def start(request: Request, limiter: RateLimiter, caller: Caller) -> bool:
    """Count the request's windows while it runs, if it may run before its decision and
    the project has room; whether it does."""
    if not getattr(request.state, MAY_DECIDE_LATE, False):
        return False
    if not limiter.reserve_room(caller.plan, caller.project_id):
        return False
    setattr(request.state, LATE_DECISION, LateDecision(limiter, caller))
    return True


def pending(request: Request) -> LateDecision | None:
    """The request's decision still to be settled, if it runs before it."""
    late: LateDecision | None = getattr(request.state, LATE_DECISION, None)
    return late


async def settle(request: Request) -> None:
    """Settle the request's late decision, if it has one (`LateDecision.settle`)."""
    late = pending(request)
    if late is not None:
        await late.settle(request)


def _retrieved(counting: asyncio.Future[Any]) -> None:
    """A count nobody waited for (its request gone) fails quietly."""
    if not counting.cancelled() and counting.exception() is not None:
        log.debug("a rate-limit count failed: %s", counting.exception())
