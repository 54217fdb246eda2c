"""The caller's own project: settings, API keys, plans and scheduled plan changes. A key only
ever sees its own project; another project's key id is simply not found. Reading the project
and the plans takes any key; everything else here takes an admin key (`AdminCaller`), and
key grants follow `key_grants`."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from entryway.domain.approvals import ApprovalKind, plan_change_needs_approval
from entryway.domain.plans import PLANS
from entryway.service.auth import AdminCaller, CurrentCaller
from entryway.service.key_grants import (
    allowlist_of,
    grantable,
    key_out,
    last_admin_key,
    no_key,
    no_store,
    refuse_own_key,
    supported,
    within_granter,
)
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
from entryway.service.schemas_approvals import ApprovalOut
from entryway.service.services import Services
from entryway.storage.apikeys import KeyInfo, KeyLimitError, LastAdminKeyError, UnknownKeyError
from entryway.storage.approvals import Approvals
from entryway.storage.store import Project


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
        overage_budget=p.overage_budget,
    )


def platform_routes() -> APIRouter:
    router = APIRouter(prefix="/v1", tags=["platform"])

    @router.get("/project", operation_id="getProject")
    async def get_project(who: CurrentCaller, request: Request) -> ProjectOut:
        """The project this API key belongs to."""
        return project_out(await services_of(request).store.project(who.project_id))

    @router.patch("/project", operation_id="updateProject")
    async def update_project(who: AdminCaller, request: Request, body: ProjectPatch) -> ProjectOut:
        """Rename, set the enabled chain ids, switch the Account Abstraction module, set the
        low-balance alert threshold (credits; null: a tenth of the monthly grant), set the
        spending budget (the most overage a cycle may reach through sponsorship, in credits;
        null: none, overage is never refused)."""
        changes = body.model_dump(exclude_unset=True)
        if "chains" in changes and changes["chains"] is not None:
            supported(changes["chains"])
        for required in ("name", "chains", "aa_module_enabled"):
            if required in changes and changes[required] is None:
                raise Problem(
                    422, "validation_error", "Invalid value", f"{required} cannot be null"
                )
        services = services_of(request)
        project = await services.store.update_project(who.project_id, **changes)
        if "overage_budget" in changes:  # a lower budget may already be near its alert
            services.platform.meter.alerts_may_be_due(who.project_id)
        return project_out(project)

    @router.get("/keys", operation_id="listKeys")
    async def list_keys(who: AdminCaller, request: Request) -> list[KeyOut]:
        """The project's API keys (ids, roles and chains; secrets are never shown again)."""
        return [key_out(k) for k in await services_of(request).store.keys(who.project_id)]

    @router.post("/keys", operation_id="createKey", status_code=201)
    async def create_key(
        who: AdminCaller, request: Request, response: Response, body: KeyCreate
    ) -> KeyCreated:
        """A new key with access to `chains` (within the project's and this key's), `service`
        unless `role` says `admin`; the secret is in this answer only. A project holding its
        most active keys (ENTRYWAY_MAX_KEYS_PER_PROJECT) is answered 409 key_limit_reached."""
        store = services_of(request).store
        project = await store.project(who.project_id)
        chains = grantable(body.chains, project.chains, who)
        # Checked before the key exists: a refused allowlist issues nothing.
        allowlist = allowlist_of(body.allowed_origins, body.allowed_client_addresses, None)
        try:
            issued = await store.issue_key(
                who.project_id, body.environment, chains, datetime.now(UTC), role=body.role
            )
        except KeyLimitError as exc:
            raise Problem(409, "key_limit_reached", "API key limit reached", str(exc)) from None
        info = await store.api_keys.change(
            who.project_id,
            issued.key_id,
            name=body.name,
            allowlist=allowlist,
        )
        no_store(response)
        return KeyCreated(**key_out(info).model_dump(), api_key=issued.secret)

    @router.patch("/keys/{key_id}", operation_id="updateKey")
    async def update_key(who: AdminCaller, request: Request, key_id: str, body: KeyPatch) -> KeyOut:
        """Set another key's chains, role, name or allowlists of origins and client
        addresses (no key changes itself). Demoting the project's last admin key answers 409
        last_admin_key; an entry that is not an origin or an IP address or network, 422
        invalid_allowlist."""
        store = services_of(request).store
        refuse_own_key(who, key_id)
        target = await _managed_key(request, who.project_id, key_id)
        within_granter(target.chains, who)
        chains = None
        if body.chains is not None:
            project = await store.project(who.project_id)
            chains = grantable(body.chains, project.chains, who)
        try:
            info = await store.api_keys.change(
                who.project_id,
                key_id,
                chains=chains,
                role=body.role,
                name=body.name,
                allowlist=allowlist_of(
                    body.allowed_origins, body.allowed_client_addresses, target.allowlist
                ),
            )
        except UnknownKeyError:
            raise no_key(key_id) from None
        except LastAdminKeyError:
            raise last_admin_key(key_id) from None
        return key_out(info)

    @router.delete("/keys/{key_id}", operation_id="revokeKey", status_code=204)
    async def revoke_key(who: AdminCaller, request: Request, key_id: str) -> Response:
        """Revoke a key at once (the key making the call may revoke itself). The project's
        last admin key cannot be revoked: 409 last_admin_key."""
        target = await _managed_key(request, who.project_id, key_id)
        within_granter(target.chains, who)
        try:
            await services_of(request).store.revoke_key(
                key_id, datetime.now(UTC), project_id=who.project_id
            )
        except UnknownKeyError:
            raise no_key(key_id) from None
        except LastAdminKeyError:
            raise last_admin_key(key_id) from None
        return Response(status_code=204)

    @router.get("/plans", operation_id="listPlans")
    async def list_plans(who: CurrentCaller, request: Request) -> list[PlanOut]:
        """The plans (requirements §8.1): prices in micro-euros, VAT included."""
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

    @router.put(
        "/project/plan",
        operation_id="changePlan",
        response_model=ProjectOut,
        responses={202: {"model": ApprovalOut, "description": "waiting for the operator"}},
    )
    async def change_plan(who: AdminCaller, request: Request, body: PlanChange) -> Response:
        """Schedule a change that lowers the bill (a cheaper plan; from ENTERPRISE, any listed
        plan), or cancel a scheduled change by asking for the current plan: it takes effect
        when the next cycle starts (200, the project). A change that raises the bill (to
        ENTERPRISE included) waits for the operator's approval: 202 with the pending
        approval, and nothing changes until the operator approves it (then it is scheduled
        for the next cycle)."""
        services = services_of(request)
        store = services.store
        now = datetime.now(UTC)
        approvals = Approvals(store.engine, store.ledger)
        by = f"key:{who.key_id}"
        project = await store.project(who.project_id)
        if plan_change_needs_approval(project.plan, body.plan):
            pending = await approvals.request(
                who.project_id, ApprovalKind.PLAN_CHANGE, body.plan.value, by, now
            )
            out = ApprovalOut.of(pending).model_dump(mode="json", by_alias=True)
            return JSONResponse(out, status_code=202)
        # Recorded with the key that made it: the billing page shows who changed the plan.
        await approvals.record_plan_change(who.project_id, body.plan, by, now)
        project = await store.project(who.project_id)
        out = project_out(project).model_dump(mode="json", by_alias=True)
        return JSONResponse(out)

    return router


def services_of(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


async def _managed_key(request: Request, project_id: str, key_id: str) -> KeyInfo:
    try:
        return await services_of(request).store.api_keys.key(project_id, key_id)
    except UnknownKeyError:
        raise no_key(key_id) from None
