"""What every dashboard page shares: the templates, the signed-in viewer, CSRF checks on
every form, and the 404 that answers alike for a project that does not exist and for one
the viewer may not see."""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.datastructures import FormData

from entryway.dashboard.names import usage_label, words
from entryway.dashboard.sign_in_guard import SignInLimits
from entryway.domain.accounts import ProjectRole
from entryway.service.services import Services
from entryway.storage.accounts import AccountStore, Session
from entryway.storage.store import Project, UnknownError

HERE = Path(__file__).parent
SESSION_COOKIE = "entryway_session"
CSRF_COOKIE = "entryway_csrf"  # the token of forms shown before sign-in
CSRF_FIELD = "csrf_token"
PREFIX = "/dashboard"
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_ID = re.compile(r"[0-9A-Za-z-]{1,36}")

templates = Environment(
    loader=FileSystemLoader(HERE / "templates"),
    autoescape=select_autoescape(["html", "svg"]),
    trim_blocks=True,
    lstrip_blocks=True,
)
templates.globals.update(usage_label=usage_label, words=words)


@dataclass(frozen=True, slots=True)
class DashboardOptions:
    """`secure_cookies`: the session cookie is sent over HTTPS only (browsers treat
    http://localhost and 127.0.0.1 as secure, so this holds for a local `entryway up`).
    `sign_in`: the throttles and the hashing bound of `sign_in_guard`."""

    secure_cookies: bool = True
    # Where users reach the dashboard (`http.public_url`, else the address served on): the
    # links it hands out (invitations) start with it, never with the request's Host header.
    public_url: str = "http://127.0.0.1:8000"
    sign_in: SignInLimits = field(default_factory=SignInLimits)


class DashboardError(Exception):
    """A page that cannot be shown: answered with `status` and a page saying `message`."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class PageNotFoundError(DashboardError):
    def __init__(self) -> None:
        super().__init__(404, "There is no such page, or it is not yours to see.")


class SignInRequiredError(Exception):
    """The page needs a signed-in viewer: answered with a redirect to the sign-in page."""


@dataclass
class Viewer:
    """Who is looking: a session, or nobody yet (with the token of the forms they see)."""

    session: Session | None
    csrf_token: str
    new_csrf_cookie: bool = False  # the pre-sign-in token was made for this request
    cookies: dict[str, str | None] = field(default_factory=dict)  # to set (None: delete)

    @property
    def signed_in(self) -> bool:
        return self.session is not None

    @property
    def user_id(self) -> str | None:
        return None if self.session is None else self.session.user_id

    @property
    def operator(self) -> bool:
        return self.session is not None and self.session.operator


@dataclass(frozen=True, slots=True)
class ProjectPage:
    """A project the viewer may open, with their role (owner for the operator)."""

    project: Project
    role: ProjectRole

    @property
    def project_id(self) -> str:
        return self.project.project_id


def now() -> datetime:
    return datetime.now(UTC)


def services(request: Request) -> Services:
    found: Services = request.app.state.services
    return found


def accounts(request: Request) -> AccountStore:
    return AccountStore(services(request).store.engine)


def options(request: Request) -> DashboardOptions:
    found: DashboardOptions = request.app.state.dashboard
    return found


async def viewer(request: Request) -> Viewer:
    """The request's viewer (a FastAPI dependency): their live session, or none."""
    secret = request.cookies.get(SESSION_COOKIE)
    session = await accounts(request).session(secret, now()) if secret else None
    if session is not None:
        return Viewer(session, session.csrf_token)
    token = request.cookies.get(CSRF_COOKIE)
    if token and 20 <= len(token) <= 100:
        return Viewer(None, token)
    return Viewer(None, secrets.token_urlsafe(32), new_csrf_cookie=True)


async def signed_in(request: Request) -> Viewer:
    found = await viewer(request)
    if found.session is None:
        raise SignInRequiredError
    return found


async def operator(request: Request) -> Viewer:
    found = await signed_in(request)
    if not found.operator:
        raise PageNotFoundError
    return found


AnyViewer = Annotated[Viewer, Depends(viewer)]
SignedIn = Annotated[Viewer, Depends(signed_in)]
OperatorViewer = Annotated[Viewer, Depends(operator)]


async def form(request: Request, who: Viewer) -> FormData:
    """The posted form, after its CSRF token is checked against the viewer's."""
    data = await request.form()
    sent = data.get(CSRF_FIELD)
    if not isinstance(sent, str) or not secrets.compare_digest(sent, who.csrf_token):
        raise DashboardError(403, "This form has expired. Reload the page and try again.")
    return data


def text(data: FormData, name: str, *, limit: int = 2000) -> str:
    """A posted text field, trimmed and cut at `limit`, without control characters but line
    breaks and tabs (PostgreSQL refuses NUL, and none of them belongs in a name or a note)."""
    value = data.get(name)
    if not isinstance(value, str):
        return ""
    return _CONTROL.sub("", value).strip()[:limit]


def plausible_id(value: str) -> bool:
    """Whether `value` could be a project's or a user's id (a UUID's characters and length):
    anything else is answered as not found before it reaches the database."""
    return _ID.fullmatch(value) is not None


async def project_page(request: Request, who: Viewer, project_id: str) -> ProjectPage:
    """The project if the viewer may open it; otherwise 404, whether it exists or not."""
    if not plausible_id(project_id):
        raise PageNotFoundError
    role = None
    if who.operator:
        role = ProjectRole.OWNER
    elif who.user_id is not None:
        role = await accounts(request).role(project_id, who.user_id)
    if role is None:
        raise PageNotFoundError
    try:
        project = await services(request).store.project(project_id)
    except UnknownError:
        raise PageNotFoundError from None
    return ProjectPage(project, role)


def render(
    request: Request,
    who: Viewer,
    template: str,
    context: Mapping[str, Any] | None = None,
    *,
    status: int = 200,
) -> Response:
    page = templates.get_template(template).render(
        request=request,
        viewer=who,
        csrf_token=who.csrf_token,
        csrf_field=CSRF_FIELD,
        prefix=PREFIX,
        **(context or {}),
    )
    return finish(request, who, HTMLResponse(page, status_code=status))


def redirect(request: Request, who: Viewer, to: str) -> Response:
    """After a successful form: see the result at `to` (POST, redirect, GET)."""
    return finish(request, who, RedirectResponse(to, status_code=303))


def finish(request: Request, who: Viewer, response: Response) -> Response:
    secure = options(request).secure_cookies
    if who.new_csrf_cookie:
        response.set_cookie(
            CSRF_COOKIE, who.csrf_token, httponly=True, secure=secure, samesite="strict",
            path=PREFIX,
        )  # fmt: skip
    for name, value in who.cookies.items():
        if value is None:
            response.delete_cookie(name, path=PREFIX, secure=secure, httponly=True)
        else:
            response.set_cookie(
                name, value, httponly=True, secure=secure, samesite="lax", path=PREFIX,
                max_age=30 * 24 * 3600,
            )  # fmt: skip
    return response
