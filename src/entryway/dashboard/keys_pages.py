"""API keys: the project's keys by their public prefix with their last use; create one with
a chain set, a role, a name and optional allowlists of origins and client addresses (its
secret shown once, with a copy button), edit a key's name and allowlists, rotate, revoke. The same
store calls and rules as the REST API's /v1/keys: a project keeps an active admin key. Only
owners create or rotate admin keys."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from entryway.dashboard import web
from entryway.dashboard.key_form import KeyFieldError, KeyFields, checked
from entryway.dashboard.policy_errors import FieldError
from entryway.domain.accounts import ProjectRole
from entryway.domain.apikeys import IssuedKey, KeyEnvironment, KeyRole
from entryway.domain.networks import NETWORKS
from entryway.storage.apikeys import KeyInfo, KeyLimitError, LastAdminKeyError, UnknownKeyError

KEY_ID_LENGTH = 8
# An admin key changes the plan, the keys and the settings over the API: it is an owner's
# power, which members do not have in the dashboard either.
NO_FIELDS = KeyFields()  # a blank form
OWNERS_ONLY = "Only the project's owners create admin keys (and rotate them)."


def prefix(key: KeyInfo) -> str:
    """The key as it may be shown: its public part, never the secret."""
    return f"ew_{key.environment.value}_{key.key_id}_…"


def _chains(data: object, allowed: frozenset[int]) -> list[int]:
    chosen: set[int] = set()
    for value in data.getlist("chains"):  # type: ignore[attr-defined]
        try:
            chain_id = int(str(value))
        except ValueError:
            raise web.DashboardError(400, "Choose chains from the list.") from None
        if chain_id not in allowed:
            raise web.DashboardError(
                400, f"Chain {chain_id} is not enabled for the project: enable it first."
            )
        chosen.add(chain_id)
    return sorted(chosen)


def routes() -> APIRouter:
    router = APIRouter()

    async def _page(
        request: Request,
        who: web.Viewer,
        page: web.ProjectPage,
        *,
        created: tuple[IssuedKey, KeyInfo] | None = None,
        error: str | None = None,
        status: int = 200,
        fields: KeyFields = NO_FIELDS,
        problem: FieldError | None = None,
    ) -> Response:
        keys = await web.services(request).store.keys(page.project_id)
        context = {
            "page": page,
            "section": "keys",
            "keys": sorted(keys, key=lambda k: (k.revoked_at is not None, k.created_at)),
            "prefix_of": prefix,
            "networks": NETWORKS,
            "project_chains": sorted(page.project.chains),
            "environments": list(KeyEnvironment),
            "roles": list(KeyRole),
            "owner": page.role is ProjectRole.OWNER,
            "created": created,
            "error": error,
            "done": request.query_params.get("done"),
            "fields": fields,
            "problem": problem,
        }
        return web.render(request, who, "keys.html", context, status=status)

    @router.get("/projects/{project_id}/keys")
    async def keys_page(request: Request, project_id: str, who: web.SignedIn) -> Response:
        page = await web.project_page(request, who, project_id)
        return await _page(request, who, page)

    @router.post("/projects/{project_id}/keys")
    async def create_key(request: Request, project_id: str, who: web.SignedIn) -> Response:
        page = await web.project_page(request, who, project_id)
        data = await web.form(request, who)
        fields = KeyFields.posted(data)
        try:
            name, allowlist = checked(fields)
        except KeyFieldError as exc:
            return await _page(request, who, page, fields=fields, problem=exc.problem, status=400)
        try:
            chains = _chains(data, page.project.chains)
            if not chains:
                raise web.DashboardError(400, "Give the key at least one chain.")
            environment = KeyEnvironment(web.text(data, "environment") or "test")
            role = KeyRole(web.text(data, "role") or "service")
        except ValueError:
            return await _page(request, who, page, error="Choose from the lists.", status=400)
        except web.DashboardError as exc:
            return await _page(request, who, page, error=exc.message, status=400)
        if role is KeyRole.ADMIN and page.role is not ProjectRole.OWNER:
            return await _page(request, who, page, error=OWNERS_ONLY, status=403)
        store = web.services(request).store
        try:
            issued = await store.issue_key(project_id, environment, chains, web.now(), role=role)
        except KeyLimitError as exc:
            return await _page(request, who, page, error=str(exc), status=409)
        info = await store.api_keys.change(
            project_id, issued.key_id, name=name, allowlist=allowlist
        )
        return await _page(request, who, page, created=(issued, info))

    @router.post("/projects/{project_id}/keys/{key_id}/rotate")
    async def rotate_key(
        request: Request, project_id: str, key_id: str, who: web.SignedIn
    ) -> Response:
        """A new key with the old one's chains, environment and role; the old one revoked
        in the same breath. The new secret is shown once."""
        page = await web.project_page(request, who, project_id)
        await web.form(request, who)
        store = web.services(request).store
        old = await _key(request, project_id, key_id)
        if old.role is KeyRole.ADMIN and page.role is not ProjectRole.OWNER:
            return await _page(request, who, page, error=OWNERS_ONLY, status=403)
        if old.revoked_at is not None:
            return await _page(
                request, who, page, error="A revoked key cannot be rotated.", status=400
            )
        chains = sorted(old.chains & page.project.chains)  # a key's chains lie in its project's
        if not chains:
            message = "None of this key's chains is enabled for the project now: create a new key."
            return await _page(request, who, page, error=message, status=400)
        at = web.now()
        issued = await store.issue_key(
            project_id, old.environment, chains, at, role=old.role, replacing=old.key_id
        )
        # The new key keeps the old one's name and allowlists, so the rotation changes nothing
        # about where it works.
        info = await store.api_keys.change(
            project_id, issued.key_id, name=old.name or "", allowlist=old.allowlist
        )
        await store.revoke_key(old.key_id, at, project_id=project_id)  # the new admin exists
        return await _page(request, who, page, created=(issued, info))

    @router.get("/projects/{project_id}/keys/{key_id}/edit")
    async def edit_page(
        request: Request, project_id: str, key_id: str, who: web.SignedIn
    ) -> Response:
        page = await web.project_page(request, who, project_id)
        key = await _editable(request, page, project_id, key_id)
        return _edit(request, who, page, key, KeyFields.of(key))

    @router.post("/projects/{project_id}/keys/{key_id}")
    async def save_key(
        request: Request, project_id: str, key_id: str, who: web.SignedIn
    ) -> Response:
        """A key's name and allowlists, as the API's PATCH /v1/keys/{keyId} sets them: each
        list replaces the one before; empty, the key works from anywhere again."""
        page = await web.project_page(request, who, project_id)
        data = await web.form(request, who)
        key = await _editable(request, page, project_id, key_id)
        fields = KeyFields.posted(data)
        try:
            name, allowlist = checked(fields)
        except KeyFieldError as exc:
            return _edit(request, who, page, key, fields, exc.problem, status=400)
        store = web.services(request).store
        await store.api_keys.change(project_id, key.key_id, name=name, allowlist=allowlist)
        return web.redirect(request, who, f"{web.PREFIX}/projects/{project_id}/keys?done=saved")

    @router.post("/projects/{project_id}/keys/{key_id}/revoke")
    async def revoke_key(
        request: Request, project_id: str, key_id: str, who: web.SignedIn
    ) -> Response:
        page = await web.project_page(request, who, project_id)
        await web.form(request, who)
        old = await _key(request, project_id, key_id)
        try:
            await web.services(request).store.revoke_key(
                old.key_id, web.now(), project_id=project_id
            )
        except LastAdminKeyError:
            message = (
                f"{prefix(old)} is the project's last active admin key: create another admin "
                "key before revoking it."
            )
            return await _page(request, who, page, error=message, status=409)
        return web.redirect(request, who, f"{web.PREFIX}/projects/{project_id}/keys?done=revoked")

    return router


async def _editable(
    request: Request, page: web.ProjectPage, project_id: str, key_id: str
) -> KeyInfo:
    """An active key the viewer may change (an admin key: an owner only)."""
    key = await _key(request, project_id, key_id)
    if key.revoked_at is not None:
        raise web.DashboardError(400, "A revoked key cannot be changed.")
    if key.role is KeyRole.ADMIN and page.role is not ProjectRole.OWNER:
        raise web.DashboardError(403, "Only the project's owners change admin keys.")
    return key


def _edit(
    request: Request,
    who: web.Viewer,
    page: web.ProjectPage,
    key: KeyInfo,
    fields: KeyFields,
    problem: FieldError | None = None,
    *,
    status: int = 200,
) -> Response:
    context = {
        "page": page,
        "section": "keys",
        "key": key,
        "key_prefix": prefix(key),
        "fields": fields,
        "problem": problem,
    }
    return web.render(request, who, "keys_edit.html", context, status=status)


async def _key(request: Request, project_id: str, key_id: str) -> KeyInfo:
    if len(key_id) != KEY_ID_LENGTH:
        raise web.PageNotFoundError
    try:
        return await web.services(request).store.api_keys.key(project_id, key_id)
    except UnknownKeyError:
        raise web.PageNotFoundError from None
