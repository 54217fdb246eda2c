"""Whether a call may use a chain: the checks of requirements §5 and §7, with the reason. Pure.

A chain is usable when it is a supported network, enabled for the project, in the key's
chain set, and the project's Account Abstraction module is on; a FREE project may use
testnets only (requirements §8.2). The refusal lists every check and whether it passed, so an
integrator sees at once what to change.
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from dataclasses import dataclass

from entryway.domain.networks import NETWORKS
from entryway.domain.plans import Plan
from entryway.errors import EntrywayError


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    passed: bool


class ChainNotRecognisedError(EntrywayError):
    code = "chain_not_recognised"

    def __init__(self, chain_id: int, checks: tuple[Check, ...]) -> None:
        failed = ", ".join(c.name for c in checks if not c.passed)
        super().__init__(f"chain ID {chain_id} is not recognised: {failed}")
        self.chain_id = chain_id
        self.checks = checks


class PlanNetworkNotAllowedError(EntrywayError):
    code = "plan_network_not_allowed"

    def __init__(self, chain_id: int, plan: Plan) -> None:
        super().__init__(
            f"the {plan.name.value} plan runs on testnets only; chain {chain_id} is a mainnet"
        )
        self.chain_id = chain_id
        self.plan = plan


@dataclass(frozen=True, slots=True)
class AccessContext:
    project_chains: Set[int]
    key_chains: Set[int]
    aa_module_enabled: bool
    plan: Plan


def check_chain_access(chain_id: int, ctx: AccessContext) -> None:
    network = NETWORKS.get(chain_id)
    checks = (
        Check("the chain ID is a supported network", network is not None),
        Check("the chain ID is enabled for the project", chain_id in ctx.project_chains),
        Check("the API key has access to that network", chain_id in ctx.key_chains),
        Check("the Account Abstraction module is enabled", ctx.aa_module_enabled),
    )
    if not all(c.passed for c in checks):
        raise ChainNotRecognisedError(chain_id, checks)
    assert network is not None
    if not ctx.plan.mainnet and not network.is_testnet:
        raise PlanNetworkNotAllowedError(chain_id, ctx.plan)


def unknown_chains(chain_ids: Iterable[int]) -> set[int]:
    """The ids that are not supported networks (a project or key cannot enable them)."""
    return {c for c in chain_ids if c not in NETWORKS}
