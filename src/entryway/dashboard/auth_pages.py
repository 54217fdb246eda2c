"""Sign up, sign in (with a password, or as the operator with the operator token), sign out,
change the password, and open an invitation link."""

from __future__ import annotations

import secrets

from fastapi import APIRouter, Request
from fastapi.responses import Response

from entryway.dashboard import web
from entryway.dashboard.passwords import PasswordWorkBusyError
from entryway.dashboard.sign_in_guard import TooManyAttemptsError, client_address, guard
from entryway.dashboard.web import Viewer
from entryway.domain.accounts import AccountError, check_password, normalized_email

SIGN_IN_FAILED = "That email and password do not match an account."
BUSY_RETRY_S = 1  # the hashing queue drains in well under a second


def _refused(
    request: Request, who: Viewer, template: str, context: dict[str, str], retry_after_s: int
) -> Response:
    """429 with Retry-After: answered before any password work, whoever the account is."""
    message = f"Too many attempts: wait {retry_after_s} s and try again."
    page = web.render(request, who, template, {**context, "error": message}, status=429)
    page.headers["Retry-After"] = str(retry_after_s)
    return page


async def _signed_in_as(request: Request, who: Viewer, secret: str) -> None:
    """The browser's new session; the one it had before (another account's, say) ends."""
    previous = request.cookies.get(web.SESSION_COOKIE)
    if previous:
        await web.accounts(request).close_session(previous)
    who.cookies[web.SESSION_COOKIE] = secret
    who.cookies[web.CSRF_COOKIE] = None


def _next(path: str) -> str:
    """Where to go after signing in: a dashboard path only, never another site."""
    if path.startswith(web.PREFIX + "/") and not path.startswith("//") and "\\" not in path:
        return path
    return f"{web.PREFIX}/projects"


async def _claim(request: Request, next_path: str, email: str, password_hash: str) -> str | None:
    """Sign-up from an invitation link (`next`) by a user the operator API named without a
    password: the link lets them set one (`AccountStore.claim_by_invitation`)."""
    start = f"{web.PREFIX}/invitations/"
    if not next_path.startswith(start):
        return None
    token = next_path[len(start) :][:100]
    return await web.accounts(request).claim_by_invitation(token, email, password_hash, web.now())


def _retry_after(exc: TooManyAttemptsError | PasswordWorkBusyError) -> int:
    return exc.retry_after_s if isinstance(exc, TooManyAttemptsError) else BUSY_RETRY_S


def auth_routes() -> APIRouter:
    router = APIRouter()

    @router.get("/signup")
    async def sign_up_page(request: Request, who: web.AnyViewer) -> Response:
        if who.signed_in:
            return web.redirect(request, who, f"{web.PREFIX}/projects")
        return web.render(
            request, who, "signup.html", {"next": request.query_params.get("next", "")}
        )

    @router.post("/signup")
    async def sign_up(request: Request, who: web.AnyViewer) -> Response:
        data = await web.form(request, who)
        email_given = web.text(data, "email", limit=400)
        password = data.get("password")
        password = password if isinstance(password, str) else ""
        sign_in_guard = guard(request)
        try:
            email = normalized_email(email_given)
            check_password(password, email)
            if password != data.get("password_again"):
                raise AccountError("The two passwords differ.")
            await sign_in_guard.admit(client_address(request))
            password_hash = await sign_in_guard.passwords.hash(password)
            try:
                user_id = await web.accounts(request).sign_up(email, password_hash, web.now())
            except AccountError:
                claimed = await _claim(request, web.text(data, "next"), email, password_hash)
                if claimed is None:
                    raise
                user_id = claimed
        except AccountError as exc:
            context = {"error": str(exc), "email": email_given, "next": web.text(data, "next")}
            return web.render(request, who, "signup.html", context, status=400)
        except (TooManyAttemptsError, PasswordWorkBusyError) as exc:
            context = {"email": email_given, "next": web.text(data, "next")}
            return _refused(request, who, "signup.html", context, _retry_after(exc))
        secret, _ = await web.accounts(request).open_session(user_id, operator=False, at=web.now())
        await _signed_in_as(request, who, secret)
        return web.redirect(request, who, _next(web.text(data, "next")))

    @router.get("/signin")
    async def sign_in_page(request: Request, who: web.AnyViewer) -> Response:
        if who.signed_in:
            return web.redirect(request, who, f"{web.PREFIX}/projects")
        return web.render(
            request, who, "signin.html", {"next": request.query_params.get("next", "")}
        )

    @router.post("/signin")
    async def sign_in(request: Request, who: web.AnyViewer) -> Response:
        """Known email or not, the same throttles, the same argon2 work and the same answer:
        neither the words nor the time tell whether an account exists."""
        data = await web.form(request, who)
        store = web.accounts(request)
        email_given = web.text(data, "email", limit=400)
        password = data.get("password")
        password = password if isinstance(password, str) else ""
        context = {"email": email_given, "next": web.text(data, "next")}
        try:
            email = normalized_email(email_given)
        except AccountError:
            email = ""
        sign_in_guard = guard(request)
        address = client_address(request)
        try:
            await sign_in_guard.admit(address, email or email_given.lower())
            user = await store.user_by_email(email) if email else None
            right = await sign_in_guard.passwords.verify(
                user.password_hash if user else None, password
            )
        except (TooManyAttemptsError, PasswordWorkBusyError) as exc:
            return _refused(request, who, "signin.html", context, _retry_after(exc))
        if not right or user is None:
            return web.render(
                request, who, "signin.html", {**context, "error": SIGN_IN_FAILED}, status=400
            )
        await sign_in_guard.signed_in(address, email)
        secret, _ = await store.open_session(user.user_id, operator=False, at=web.now())
        await _signed_in_as(request, who, secret)
        return web.redirect(request, who, _next(web.text(data, "next")))

    @router.get("/operator/signin")
    async def operator_sign_in_page(request: Request, who: web.AnyViewer) -> Response:
        return web.render(request, who, "operator_signin.html")

    @router.post("/operator/signin")
    async def operator_sign_in(request: Request, who: web.AnyViewer) -> Response:
        data = await web.form(request, who)
        expected = web.services(request).admin_token
        given = web.text(data, "token", limit=400)
        try:
            await guard(request).admit_operator(client_address(request))
        except TooManyAttemptsError as exc:
            return _refused(request, who, "operator_signin.html", {}, exc.retry_after_s)
        if not expected or not secrets.compare_digest(given.encode(), expected.encode()):
            context = {"error": "That is not the operator token."}
            return web.render(request, who, "operator_signin.html", context, status=400)
        secret, _ = await web.accounts(request).open_session(None, operator=True, at=web.now())
        await _signed_in_as(request, who, secret)
        return web.redirect(request, who, f"{web.PREFIX}/operator")

    @router.post("/signout")
    async def sign_out(request: Request, who: web.AnyViewer) -> Response:
        await web.form(request, who)
        secret = request.cookies.get(web.SESSION_COOKIE)
        if secret:
            await web.accounts(request).close_session(secret)
        who.cookies[web.SESSION_COOKIE] = None
        return web.redirect(request, who, f"{web.PREFIX}/signin")

    @router.get("/account")
    async def account_page(request: Request, who: web.SignedIn) -> Response:
        return web.render(request, who, "account.html", {"done": request.query_params.get("done")})

    @router.post("/account/password")
    async def change_password(request: Request, who: web.SignedIn) -> Response:
        data = await web.form(request, who)
        store = web.accounts(request)
        user = await store.user(who.user_id) if who.user_id else None
        if user is None:
            raise web.DashboardError(400, "The operator token has no password to change.")
        current = data.get("current_password")
        new = data.get("new_password")
        sign_in_guard = guard(request)
        try:
            # The current password is guessed no faster here than on the sign-in page.
            await sign_in_guard.admit(client_address(request), user.email)
            if not isinstance(current, str) or not await sign_in_guard.passwords.verify(
                user.password_hash, current
            ):
                raise AccountError("The current password is not right.")
            new = new if isinstance(new, str) else ""
            check_password(new, user.email)
            if new != data.get("new_password_again"):
                raise AccountError("The two new passwords differ.")
            new_hash = await sign_in_guard.passwords.hash(new)
        except AccountError as exc:
            return web.render(request, who, "account.html", {"error": str(exc)}, status=400)
        except (TooManyAttemptsError, PasswordWorkBusyError) as exc:
            return _refused(request, who, "account.html", {}, _retry_after(exc))
        await store.set_password(user.user_id, new_hash)  # ends every session
        secret, _ = await store.open_session(user.user_id, operator=False, at=web.now())
        await _signed_in_as(request, who, secret)
        return web.redirect(request, who, f"{web.PREFIX}/account?done=password")

    @router.get("/invitations/{token}")
    async def invitation_page(request: Request, token: str, who: web.AnyViewer) -> Response:
        if not who.signed_in:
            path = f"{web.PREFIX}/invitations/{token}"
            return web.render(request, who, "invitation.html", {"next": path})
        return web.render(request, who, "invitation.html", {"token": token})

    @router.post("/invitations/{token}")
    async def accept_invitation(request: Request, token: str, who: web.SignedIn) -> Response:
        await web.form(request, who)
        if who.user_id is None:
            raise web.DashboardError(400, "Sign in as a user to join a project.")
        try:
            project_id = await web.accounts(request).accept_invitation(
                token[:100], who.user_id, web.now()
            )
        except AccountError as exc:
            raise web.DashboardError(400, str(exc)) from None
        return web.redirect(request, who, f"{web.PREFIX}/projects/{project_id}")

    return router
