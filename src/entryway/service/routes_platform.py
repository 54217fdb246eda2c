"""The caller's own project: settings, API keys, plans and scheduled plan changes. A key only
ever sees its own project; another project's key id is simply not found."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Request, Response

from entryway.domain.chain_access import unknown_chains
from entryway.domain.plans import PLANS
from entryway.service.auth import CurrentCaller
from entryway.service.problems import Problem
from entryway.service.schemas import (
    KeyCreate,
    KeyCreated,
    KeyOut,
    KeyPatch,
    PlanChange,
    PlanOut,
    ProjectOut,
    ProjectPatch,
)
from entryway.service.services import Services
from entryway.storage.store import KeyInfo, Project, UnknownError


def project_out(p: Project) -> ProjectOut:
    sub = p.subscription
    return ProjectOut(
        project_id=p.project_id,
        name=p.name,
        chains=sorted(p.chains),
        aa_module_enabled=p.aa_module_enabled,
        plan=p.plan,
        next_plan=p.next_plan,
        cycle_start=sub.cycle_start,
        cycle_end=sub.cycle_end,
        low_balance_credits=p.low_balance_credits,
    )


def key_out(k: KeyInfo) -> KeyOut:
    return KeyOut(
        key_id=k.key_id,
        environment=k.environment,
        chains=sorted(k.chains),
        created_at=k.created_at,
        revoked_at=k.revoked_at,
    )


def _supported(chains: list[int]) -> list[int]:
    unknown = unknown_chains(chains)
    if unknown:
        raise Problem(
            422, "validation_error", "Unsupported chain",
            f"chain ids {sorted(unknown)} are not networks this service supports",
        )  # fmt: skip
    return chains


def platform_routes() -> APIRouter:
    router = APIRouter(prefix="/v1", tags=["platform"])

    def services_of(request: Request) -> Services:
        services: Services = request.app.state.services
        return services

    @router.get("/project", operation_id="getProject")
    async def get_project(who: CurrentCaller, request: Request) -> ProjectOut:
        """The project this API key belongs to."""
        return project_out(await services_of(request).store.project(who.project_id))

    @router.patch("/project", operation_id="updateProject")
    async def update_project(
        who: CurrentCaller, request: Request, body: ProjectPatch
    ) -> ProjectOut:
        """Rename, set the enabled chain ids, switch the Account Abstraction module, set the
        low-balance alert threshold (credits; null: a tenth of the monthly grant)."""
        changes = body.model_dump(exclude_unset=True)
        if "chains" in changes and changes["chains"] is not None:
            _supported(changes["chains"])
        for required in ("name", "chains", "aa_module_enabled"):
            if required in changes and changes[required] is None:
                raise Problem(
                    422, "validation_error", "Invalid value", f"{required} cannot be null"
                )
        project = await services_of(request).store.update_project(who.project_id, **changes)
        return project_out(project)

    @router.get("/keys", operation_id="listKeys")
    async def list_keys(who: CurrentCaller, request: Request) -> list[KeyOut]:
        """The project's API keys (ids and chains; secrets are never shown again)."""
        return [key_out(k) for k in await services_of(request).store.keys(who.project_id)]

    @router.post("/keys", operation_id="createKey", status_code=201)
    async def create_key(who: CurrentCaller, request: Request, body: KeyCreate) -> KeyCreated:
        """A new key with access to `chains`; the secret is in this answer only."""
        store = services_of(request).store
        issued = await store.issue_key(
            who.project_id, body.environment, _supported(body.chains), datetime.now(UTC)
        )
        info = next(k for k in await store.keys(who.project_id) if k.key_id == issued.key_id)
        return KeyCreated(**key_out(info).model_dump(), api_key=issued.secret)

    @router.patch("/keys/{key_id}", operation_id="updateKey")
    async def update_key(
        who: CurrentCaller, request: Request, key_id: str, body: KeyPatch
    ) -> KeyOut:
        """Set the chains a key may use."""
        store = services_of(request).store
        try:
            await store.set_key_chains(who.project_id, key_id, _supported(body.chains))
        except UnknownError:
            raise _no_key(key_id) from None
        return key_out(next(k for k in await store.keys(who.project_id) if k.key_id == key_id))

    @router.delete("/keys/{key_id}", operation_id="revokeKey", status_code=204)
    async def revoke_key(who: CurrentCaller, request: Request, key_id: str) -> Response:
        """Revoke a key at once (the key making the call may revoke itself)."""
        try:
            await services_of(request).store.revoke_key(
                key_id, datetime.now(UTC), project_id=who.project_id
            )
        except UnknownError:
            raise _no_key(key_id) from None
        return Response(status_code=204)

    @router.get("/plans", operation_id="listPlans")
    async def list_plans(who: CurrentCaller, request: Request) -> list[PlanOut]:
        """The plans (seed section 8.1): prices in micro-euros, VAT included."""
        config = services_of(request).platform.billing.config
        return [
            PlanOut(
                name=p.name,
                monthly_price_micro_eur=p.monthly_price_micro_eur,
                monthly_credits=p.monthly_credits,
                mainnet=p.mainnet,
                support=p.support.value,
                overage_micro_eur_per_credit=config.overage_rate(p),
            )
            for p in PLANS.values()
        ]

    @router.put("/project/plan", operation_id="changePlan")
    async def change_plan(who: CurrentCaller, request: Request, body: PlanChange) -> ProjectOut:
        """Schedule an upgrade or downgrade; it takes effect when the next cycle starts.
        Asking for the current plan cancels a scheduled change."""
        project = await services_of(request).store.schedule_plan_change(who.project_id, body.plan)
        return project_out(project)

    return router


def _no_key(key_id: str) -> Problem:
    return Problem(404, "key_not_found", "API key not found", f"no key {key_id} in this project")
