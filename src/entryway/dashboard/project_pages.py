"""Projects: the list, a new project, and a project's overview: its settings (name, chain
ids, the Account Abstraction module), the multi-chain checklist, and its members."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlalchemy import select

from entryway.dashboard import home_section, web
from entryway.domain.accounts import AccountError, ProjectRole, normalized_email
from entryway.domain.networks import NETWORKS, Network
from entryway.domain.plans import PlanName
from entryway.domain.plans import plan as plan_of
from entryway.storage.schema import projects, usage_events
from entryway.storage.store import Project

MAX_NAME = 200


@dataclass(frozen=True, slots=True)
class ChainChoice:
    network: Network
    enabled: bool
    allowed: bool  # the plan may use it (FREE: testnets only)
    served: bool  # this service runs the chain


@dataclass(frozen=True, slots=True)
class Step:
    text: str
    done: bool


def chain_choices(request: Request, project: Project | None, plan: PlanName) -> list[ChainChoice]:
    """Every supported network, testnets first, each with whether the project has it on,
    whether the plan allows it and whether this service runs it."""
    served = web.services(request).chains
    mainnet = plan_of(plan).mainnet
    enabled = set(project.chains) if project else set()
    return [
        ChainChoice(n, n.chain_id in enabled, mainnet or n.is_testnet, n.chain_id in served)
        for n in sorted(NETWORKS.values(), key=lambda n: (not n.is_testnet, n.chain_id))
    ]


def chosen_chains(data: object, plan: PlanName) -> list[int]:
    """The chain ids ticked in a form, checked against the plan: FREE runs on testnets."""
    raw = data.getlist("chains")  # type: ignore[attr-defined]
    chains: list[int] = []
    for value in raw:
        try:
            chain_id = int(str(value))
        except ValueError:
            raise AccountError("Choose chains from the list.") from None
        network = NETWORKS.get(chain_id)
        if network is None:
            raise AccountError(f"Chain {chain_id} is not a network this service supports.")
        if not plan_of(plan).mainnet and not network.is_testnet:
            raise AccountError(
                f"The {plan.value} plan runs on testnets only: {network.title} "
                f"({chain_id}) is a mainnet. Upgrade the plan to use it."
            )
        chains.append(chain_id)
    if not chains:
        raise AccountError("Choose at least one chain: a project runs on one chain or more.")
    return sorted(set(chains))


async def checklist(request: Request, project: Project) -> list[Step]:
    """The multi-chain steps, each ticked from what the project has actually done."""
    keys = [
        k
        for k in await web.services(request).store.keys(project.project_id)
        if k.revoked_at is None
    ]
    wanted = set(project.chains)
    engine = web.services(request).store.engine
    async with engine.connect() as db:
        used = {
            int(c)
            for c in (
                await db.execute(
                    select(usage_events.c.chain_id)
                    .distinct()
                    .where(
                        usage_events.c.project_id == project.project_id,
                        usage_events.c.chain_id.is_not(None),
                    )
                )
            ).scalars()
        }
    return [
        Step("Open the project in the dashboard.", True),
        Step("Add the chain IDs in the project settings.", bool(wanted)),
        Step(
            "Make sure an API key has access to every configured chain.",
            bool(wanted) and any(wanted <= set(k.chains) for k in keys),
        ),
        Step(
            "Pass the chainId in API calls or the SDK's initialisation, on each chain.",
            bool(wanted) and wanted <= used,
        ),
    ]


def project_routes() -> APIRouter:
    router = APIRouter()

    @router.get("")
    async def home(request: Request, who: web.AnyViewer) -> Response:
        if not who.signed_in:
            return web.redirect(request, who, f"{web.PREFIX}/signin")
        return web.redirect(request, who, f"{web.PREFIX}/projects")

    @router.get("/projects")
    async def project_list(request: Request, who: web.SignedIn) -> Response:
        store = web.services(request).store
        if who.operator:
            async with store.engine.connect() as db:
                ids = list(
                    (
                        await db.execute(
                            select(projects.c.project_id).order_by(projects.c.created_at)
                        )
                    ).scalars()
                )
        else:
            assert who.user_id is not None
            ids = await web.accounts(request).project_ids(who.user_id)
        rows = []
        for project_id in ids:
            project = await store.project(project_id)
            account = await store.credit_account(project_id)
            rows.append((project, account.balance(web.now())))
        return web.render(request, who, "projects.html", {"rows": rows})

    @router.get("/projects/new")
    async def new_project_page(request: Request, who: web.SignedIn) -> Response:
        context = {"chains": chain_choices(request, None, PlanName.FREE)}
        return web.render(request, who, "project_new.html", context)

    @router.post("/projects/new")
    async def create_project(request: Request, who: web.SignedIn) -> Response:
        data = await web.form(request, who)
        name = web.text(data, "name", limit=MAX_NAME + 1)
        try:
            if who.user_id is None:
                raise AccountError("Sign in as a user to own a project.")
            if not name or len(name) > MAX_NAME:
                raise AccountError(f"Give the project a name of 1 to {MAX_NAME} characters.")
            chains = chosen_chains(data, PlanName.FREE)
        except AccountError as exc:
            context = {
                "error": str(exc),
                "name": name,
                "chains": chain_choices(request, None, PlanName.FREE),
            }
            return web.render(request, who, "project_new.html", context, status=400)
        project_id = await web.services(request).store.create_project(
            who.user_id, name, PlanName.FREE, chains, web.now()
        )
        return web.redirect(request, who, f"{web.PREFIX}/projects/{project_id}")

    @router.get("/projects/{project_id}")
    async def overview(request: Request, project_id: str, who: web.SignedIn) -> Response:
        page = await web.project_page(request, who, project_id)
        return await _overview(request, who, page)

    async def _overview(
        request: Request,
        who: web.Viewer,
        page: web.ProjectPage,
        *,
        error: str | None = None,
        invitation: str | None = None,
        status: int = 200,
    ) -> Response:
        store = web.services(request).store
        project = page.project
        account = await store.credit_account(project.project_id)
        members = await web.accounts(request).members(project.project_id)
        owners = [m.user_id for m in members if m.role is ProjectRole.OWNER]
        context = {
            "page": page,
            "project": project,
            "balance": account.balance(web.now()),
            "chains": chain_choices(request, project, project.plan),
            "steps": await checklist(request, project),
            "home": await home_section.home(
                request, web.services(request), project.project_id, project.chains
            ),
            "members": members,
            "sole_owner": owners == [who.user_id],  # who may not leave: none would own it
            "invitations": await web.accounts(request).invitations(project.project_id),
            "invitation_url": invitation,
            "error": error,
            "done": request.query_params.get("done"),
            "section": "overview",
        }
        return web.render(request, who, "project.html", context, status=status)

    @router.post("/projects/{project_id}/settings")
    async def save_settings(request: Request, project_id: str, who: web.SignedIn) -> Response:
        page = await web.project_page(request, who, project_id)
        data = await web.form(request, who)
        name = web.text(data, "name", limit=MAX_NAME + 1)
        try:
            if not name or len(name) > MAX_NAME:
                raise AccountError(f"Give the project a name of 1 to {MAX_NAME} characters.")
            chains = chosen_chains(data, page.project.plan)
        except AccountError as exc:
            return await _overview(request, who, page, error=str(exc), status=400)
        await web.services(request).store.update_project(
            project_id, name=name, chains=chains, aa_module_enabled=data.get("aa_module") == "on"
        )
        return web.redirect(request, who, f"{web.PREFIX}/projects/{project_id}?done=saved")

    @router.post("/projects/{project_id}/members")
    async def invite(request: Request, project_id: str, who: web.SignedIn) -> Response:
        page = await web.project_page(request, who, project_id)
        data = await web.form(request, who)
        try:
            if page.role is not ProjectRole.OWNER:
                raise AccountError("Only the project's owners invite members.")
            email = normalized_email(web.text(data, "email", limit=400))
            role = ProjectRole(web.text(data, "role") or "member")
        except (AccountError, ValueError) as exc:
            return await _overview(request, who, page, error=str(exc), status=400)
        token = await web.accounts(request).invite(project_id, email, role, who.user_id, web.now())
        url = f"{web.options(request).public_url}{web.PREFIX}/invitations/{token}"
        return await _overview(request, who, page, invitation=url)

    @router.post("/projects/{project_id}/members/{user_id}/remove")
    async def remove_member(
        request: Request, project_id: str, user_id: str, who: web.SignedIn
    ) -> Response:
        page = await web.project_page(request, who, project_id)
        await web.form(request, who)
        if not web.plausible_id(user_id):
            raise web.PageNotFoundError
        try:
            if page.role is not ProjectRole.OWNER and user_id != who.user_id:
                raise AccountError("Only the project's owners remove other members.")
            await web.accounts(request).remove_member(project_id, user_id)
        except AccountError as exc:
            return await _overview(request, who, page, error=str(exc), status=400)
        if user_id == who.user_id:
            return web.redirect(request, who, f"{web.PREFIX}/projects")
        return web.redirect(request, who, f"{web.PREFIX}/projects/{project_id}?done=removed")

    return router
