"""The dashboard's place in the HTTP app: its routes under /dashboard, its static assets,
and how its errors are answered (an HTML page, never problem+json)."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from entryway.dashboard import (
    billing_pages,
    keys_pages,
    op_pages,
    operations_pages,
    operator_pages,
    policy_pages,
    request_pages,
    support_pages,
    usage_pages,
    web,
    webhook_pages,
)
from entryway.dashboard.auth_pages import auth_routes
from entryway.dashboard.project_pages import project_routes
from entryway.dashboard.sign_in_guard import SignInGuard
from entryway.dashboard.web import DashboardError, DashboardOptions, SignInRequiredError


def install_dashboard(app: FastAPI, options: DashboardOptions) -> None:
    app.state.dashboard = options
    app.state.sign_in_guard = SignInGuard(options.sign_in)
    app.mount(
        f"{web.PREFIX}/static", StaticFiles(directory=web.HERE / "static"), name="dashboard-static"
    )
    pages = (
        auth_routes(),
        project_routes(),
        keys_pages.routes(),
        billing_pages.routes(),
        usage_pages.routes(),
        operations_pages.routes(),
        op_pages.routes(),
        webhook_pages.routes(),
        policy_pages.routes(),
        request_pages.routes(),
        support_pages.routes(),
        operator_pages.routes(),
    )
    for router in pages:
        app.include_router(router, prefix=web.PREFIX, include_in_schema=False)

    @app.exception_handler(DashboardError)
    async def page_error(request: Request, exc: DashboardError) -> Response:
        who = await web.viewer(request)
        context = {"status": exc.status, "message": exc.message}
        return web.render(request, who, "error.html", context, status=exc.status)

    @app.exception_handler(SignInRequiredError)
    async def sign_in_first(request: Request, exc: SignInRequiredError) -> Response:
        path = request.url.path
        target = f"{web.PREFIX}/signin"
        if request.method == "GET" and path != web.PREFIX:
            target += f"?next={path}"
        return RedirectResponse(target, status_code=303)
