"""The HTTP API. `create_app(services)` is the only place routes meet the use cases.

Versioning: every operation lives under `/v1`; the seed's root paths (`/get-sdk-defaults`,
`/sdk-defaults`, `/account-info`, `/task-status`, `/op-status`) stay as stable aliases, and
`POST /rpc/{chainId}` follows the JSON-RPC specs' own versioning. Each answer carries
`Entryway-API-Version`. docs/api.md has the deprecation policy."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException

from entryway import __version__
from entryway.service.problems import Problem
from entryway.service.routes_admin import admin_routes
from entryway.service.routes_billing import billing_routes
from entryway.service.routes_chain import chain_routes
from entryway.service.routes_notary import notary_routes
from entryway.service.routes_platform import platform_routes
from entryway.service.routes_policies import policy_routes
from entryway.service.routes_tasks import task_routes
from entryway.service.routes_wallets import wallet_routes
from entryway.service.routes_webhooks import webhook_routes
from entryway.service.services import Services

API_VERSION = "v1"
log = logging.getLogger(__name__)
_STATUS_CODES = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}


def create_app(
    services: Services,
    lifespan: Callable[[FastAPI], AbstractAsyncContextManager[None]] | None = None,
) -> FastAPI:
    app = FastAPI(
        title="Entryway",
        version=__version__,
        lifespan=lifespan,
        description="ERC-4337 account abstraction: bundler, paymaster, smart wallets, "
        "notarization, metered in credits. Authenticate with `Authorization: Bearer <API_KEY>`.",
    )
    app.state.services = services

    @app.exception_handler(Problem)
    async def problem(request: Request, exc: Problem) -> Response:
        return exc.response(request.url.path)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> Response:
        errors = [
            {"location": ".".join(str(p) for p in e["loc"]), "message": e["msg"]}
            for e in exc.errors()
        ]
        detail = "; ".join(f"{e['location']}: {e['message']}" for e in errors)
        return Problem(422, "validation_error", "Invalid request", detail, errors=errors).response(
            request.url.path
        )

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        code = _STATUS_CODES.get(exc.status_code, f"http_{exc.status_code}")
        return Problem(exc.status_code, code, str(exc.detail)).response(request.url.path)

    @app.exception_handler(Exception)
    async def crash(request: Request, exc: Exception) -> Response:
        log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
        return Problem(
            500, "internal_error", "Internal error", "the service failed; retry later"
        ).response(request.url.path)

    @app.middleware("http")
    async def headers(request: Request, call_next: Any) -> Response:
        response: Response = await call_next(request)
        response.headers["Entryway-API-Version"] = API_VERSION
        for name, value in getattr(request.state, "rate_limit_headers", {}).items():
            response.headers.setdefault(name, value)
        return response

    @app.get("/healthz", operation_id="health", tags=["service"])
    async def health() -> dict[str, object]:
        """Liveness: answers once the service is started."""
        return {"status": "ok", "chains": sorted(services.chains)}

    app.include_router(chain_routes(("", f"/{API_VERSION}")))
    app.include_router(platform_routes())
    app.include_router(billing_routes())
    app.include_router(admin_routes())
    app.include_router(policy_routes())
    app.include_router(task_routes())
    app.include_router(webhook_routes())
    app.include_router(notary_routes())
    app.include_router(wallet_routes())
    return app
