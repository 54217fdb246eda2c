"""May this caller use this chain now? The "chain ID not recognised" checks of requirements §7
(project, key, plan, module) and its "network connection problem" checks (an RPC configured,
reachable, serving that chain, not under maintenance), answered as REST problems."""

from __future__ import annotations

from fastapi import Request

from entryway.domain.chain_access import (
    AccessContext,
    ChainNotRecognisedError,
    PlanNetworkNotAllowedError,
    check_chain_access,
)
from entryway.domain.plans import plan
from entryway.service.chainhealth import ChainHealth
from entryway.service.problems import Problem
from entryway.service.services import ChainRuntime, Services
from entryway.storage.store import Caller

# Seconds a client waits before asking again while a chain's node cannot be reached.
NODE_RETRY_AFTER_S = 5


def require_chain_access(who: Caller, chain_id: int) -> None:
    """403 unless the project, the key, the plan and the module allow the chain."""
    ctx = AccessContext(who.project_chains, who.key_chains, who.aa_module_enabled, plan(who.plan))
    try:
        check_chain_access(chain_id, ctx)
    except ChainNotRecognisedError as exc:
        checks = [{"check": c.name, "passed": c.passed} for c in exc.checks]
        raise Problem(403, exc.code, "Chain ID not recognised", str(exc), checks=checks) from None
    except PlanNetworkNotAllowedError as exc:
        raise Problem(403, exc.code, "Network not in plan", str(exc)) from None


class ChainGate:
    """Access, then the network's health (a passing probe is kept for a few seconds)."""

    def __init__(self) -> None:
        self.health = ChainHealth()

    async def usable_chain(self, request: Request, who: Caller, chain_id: int) -> ChainRuntime:
        """The chain's runtime, once access and the network's health are checked."""
        services: Services = request.app.state.services
        require_chain_access(who, chain_id)
        chain = services.chains.get(chain_id)
        if chain is None:
            raise Problem(
                503, "network_connection_problem", "Network connection problem",
                f"chain {chain_id} is enabled but this service has no RPC endpoint for it",
                checks=[{"check": "rpc_configured", "passed": False}],
            )  # fmt: skip
        closed = await services.maintenance.window(chain_id)
        reason = "" if closed is None else closed.reason
        status = await self.health.status(
            chain_id, chain.eth, maintenance=closed is not None, reason=reason
        )
        if not status.ok:
            failed = "; ".join(c.detail for c in status.checks if not c.passed)
            unreachable = not status.checks[0].passed  # rpc_reachable: worth asking again
            raise Problem(
                503,
                "network_connection_problem",
                "Network connection problem",
                f"chain {chain_id}: {failed}",
                checks=[
                    {"check": c.name, "passed": c.passed, "detail": c.detail} for c in status.checks
                ],
                headers={"Retry-After": str(NODE_RETRY_AFTER_S)} if unreachable else None,
            )
        return chain
