"""Sponsorship policies of the caller's project: create, list, read, change, delete. The rules
document is validated by the domain model (`entryway.domain.sponsorship`); docs/paymaster.md
describes it. A key only ever sees its own project's policies."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from entryway.domain.sponsorship import PolicyRulesError, SponsorshipPolicy, SponsorshipRules
from entryway.service.auth import AdminCaller
from entryway.service.problems import Problem
from entryway.service.schemas import Flag, Name
from entryway.storage.policies import PolicyStore

_RULES_DOC = (
    "The rules document: spendCap, operationCap, perSender, allowedTargets, "
    "allowedSelectors, startsAt, endsAt, sponsor (see docs/paymaster.md). {} allows everything."
)


class _Wire(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


class _Body(_Wire):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class PolicyCreate(_Body):
    name: Name
    rules: dict[str, Any] = Field(default_factory=dict, description=_RULES_DOC)
    active: Flag = True


class PolicyPatch(_Body):
    name: Name | None = None
    rules: dict[str, Any] | None = Field(default=None, description=_RULES_DOC)
    active: Flag | None = None


class PolicyOut(_Wire):
    policy_id: str
    name: str
    rules: dict[str, Any]
    active: bool
    created_at: datetime
    updated_at: datetime | None


class PolicyList(_Wire):
    policies: list[PolicyOut]


def policy_out(policy: SponsorshipPolicy) -> PolicyOut:
    return PolicyOut(
        policy_id=policy.policy_id,
        name=policy.name,
        rules=policy.rules.to_json(),
        active=policy.active,
        created_at=policy.created_at,
        updated_at=policy.updated_at,
    )


def _rules(doc: dict[str, Any]) -> SponsorshipRules:
    try:
        return SponsorshipRules.from_json(doc)
    except PolicyRulesError as exc:
        raise Problem(422, "invalid_policy_rules", "Invalid policy rules", str(exc)) from None


def _not_found(policy_id: str) -> Problem:
    return Problem(
        404, "policy_not_found", "Policy not found", f"no policy {policy_id} in this project"
    )


def _store(request: Request) -> PolicyStore:
    return PolicyStore(request.app.state.services.store.engine)


def policy_routes() -> APIRouter:
    router = APIRouter(prefix="/v1/policies", tags=["paymaster"])

    @router.post("", status_code=201, operation_id="createPolicy")
    async def create_policy(who: AdminCaller, request: Request, body: PolicyCreate) -> PolicyOut:
        """A sponsorship policy for this project. ERC-7677 requests name it in
        `context.policyId`; without one, the project's only active policy applies."""
        policy = await _store(request).create(
            who.project_id, body.name, _rules(body.rules), active=body.active, at=datetime.now(UTC)
        )
        return policy_out(policy)

    @router.get("", operation_id="listPolicies")
    async def list_policies(who: AdminCaller, request: Request) -> PolicyList:
        """Every policy of this project, oldest first."""
        policies = await _store(request).project_policies(who.project_id)
        return PolicyList(policies=[policy_out(p) for p in policies])

    @router.get("/{policy_id}", operation_id="getPolicy")
    async def get_policy(who: AdminCaller, request: Request, policy_id: str) -> PolicyOut:
        policy = await _store(request).get(who.project_id, policy_id)
        if policy is None:
            raise _not_found(policy_id)
        return policy_out(policy)

    @router.patch("/{policy_id}", operation_id="updatePolicy")
    async def update_policy(
        who: AdminCaller, request: Request, policy_id: str, body: PolicyPatch
    ) -> PolicyOut:
        """Rename, replace the rules (the whole document), activate or deactivate."""
        policy = await _store(request).update(
            who.project_id,
            policy_id,
            at=datetime.now(UTC),
            name=body.name,
            rules=None if body.rules is None else _rules(body.rules),
            active=body.active,
        )
        if policy is None:
            raise _not_found(policy_id)
        return policy_out(policy)

    @router.delete("/{policy_id}", status_code=204, operation_id="deletePolicy")
    async def delete_policy(who: AdminCaller, request: Request, policy_id: str) -> Response:
        """Delete the policy; what it paid for stays in the usage history."""
        if not await _store(request).delete(who.project_id, policy_id):
            raise _not_found(policy_id)
        return Response(status_code=204)

    return router
