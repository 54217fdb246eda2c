"""The HTTP API. `create_app(services)` is the only place routes meet the use cases.

Versioning: every operation lives under `/v1`; the root paths of requirements §4
(`/get-sdk-defaults`, `/sdk-defaults`, `/account-info`, `/task-status`, `/op-status`) stay as
stable aliases, and `POST /rpc/{chainId}` follows the JSON-RPC specs' own versioning. Each
answer carries `Entryway-API-Version`. docs/api.md has the deprecation policy.

At the edge, before any route: RequestMetrics (counts and times every answer) around
EdgeMiddleware (request id, bound to every log line; security headers; unhandled errors as
one logged 500 problem) around BodyGuard (body size, JSON depth and syntax; see
`RequestLimits`). /healthz, /readyz and /metrics are for operators (docs/operations.md)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException

from entryway import __version__
from entryway.observability.metrics import RequestMetrics, ServiceMetrics
from entryway.observability.readiness import Readiness
from entryway.service.body_guard import BodyGuard
from entryway.service.call_recording import CallRecording
from entryway.service.edge import EdgeMiddleware, with_request_id
from entryway.service.json_rpc_shortcut import JsonRpcShortcut, json_rpc_route
from entryway.service.limits import RequestLimits
from entryway.service.problems import Problem
from entryway.service.rate_limit_headers import RateLimitHeaders
from entryway.service.readiness_checks import ReadinessSettings, service_checks
from entryway.service.routes_admin import admin_routes
from entryway.service.routes_billing import billing_routes
from entryway.service.routes_chain import chain_routes
from entryway.service.routes_notary import notary_routes
from entryway.service.routes_operations import operations_routes
from entryway.service.routes_ops import op_routes
from entryway.service.routes_platform import platform_routes
from entryway.service.routes_policies import policy_routes
from entryway.service.routes_requests import request_log_routes
from entryway.service.routes_tasks import task_routes
from entryway.service.routes_wallets import wallet_routes
from entryway.service.routes_webhooks import webhook_routes
from entryway.service.services import Services

API_VERSION = "v1"
_STATUS_CODES = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}


def create_app(
    services: Services,
    lifespan: Callable[[FastAPI], AbstractAsyncContextManager[None]] | None = None,
    *,
    limits: RequestLimits | None = None,
    readiness: ReadinessSettings | None = None,
    metrics: ServiceMetrics | None = None,
    metrics_token: str | None = None,
) -> FastAPI:
    """The API over `services`. `metrics` (its own registry by default: apps never share
    one) is kept on `app.state.metrics` for the parts that count into it, such as the
    workers' webhook deliveries; `metrics_token` opens /metrics to scrapers off this host."""
    app = FastAPI(
        title="Entryway",
        version=__version__,
        lifespan=lifespan,
        # The service's telemetry is its Prometheus metrics and JSON logs (docs/operations.md);
        # FastAPI's own OpenTelemetry hooks, off, no longer look up providers on each request.
        telemetry={"tracing": False, "metrics": False, "logs": False},
        description="ERC-4337 account abstraction: bundler, paymaster, smart wallets, "
        "notarization, metered in credits. Authenticate with `Authorization: Bearer <API_KEY>`.",
    )
    app.state.services = services
    app.state.limits = limits = limits or RequestLimits()
    app.state.metrics = metrics = metrics or ServiceMetrics()
    readiness = readiness or ReadinessSettings()
    ready = Readiness(
        lambda: service_checks(services, readiness),
        timeout_s=readiness.timeout_s,
        cache_s=readiness.cache_s,
    )

    def answer(request: Request, problem: Problem) -> Response:
        return with_request_id(problem, request.scope).response(request.url.path)

    @app.exception_handler(Problem)
    async def problem(request: Request, exc: Problem) -> Response:
        return answer(request, exc)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> Response:
        errors = [
            {"location": ".".join(str(p) for p in e["loc"]), "message": e["msg"]}
            for e in exc.errors()
        ]
        detail = "; ".join(f"{e['location']}: {e['message']}" for e in errors)
        return answer(
            request, Problem(422, "validation_error", "Invalid request", detail, errors=errors)
        )

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        code = _STATUS_CODES.get(exc.status_code, f"http_{exc.status_code}")
        return answer(request, Problem(exc.status_code, code, str(exc.detail)))

    # Innermost: JSON-RPC calls straight to their route's endpoint (`json_rpc_shortcut`).
    chain_router = chain_routes(("", f"/{API_VERSION}"))
    app.add_middleware(JsonRpcShortcut, route=json_rpc_route(chain_router))
    # Next: the rate-limit headers go on every answer, an error handler's included, and the
    # answer's status and a refusal's body are noted for the request log.
    app.add_middleware(RateLimitHeaders)
    # Added next, so just outside it: the request log sees the caller authentication found
    # and what RateLimitHeaders noted of the answer.
    app.add_middleware(CallRecording, services=services)
    # Added last, so outermost: EdgeMiddleware sees every answer, BodyGuard's included.
    app.add_middleware(BodyGuard, limits=limits, is_json_rpc=_is_json_rpc)
    docs = (app.docs_url, app.redoc_url, app.swagger_ui_oauth2_redirect_url)
    app.add_middleware(
        EdgeMiddleware,
        docs_paths=[p for p in docs if p],
        headers={"Entryway-API-Version": API_VERSION},
    )
    app.add_middleware(RequestMetrics, metrics=metrics)

    @app.get("/healthz", operation_id="health", tags=["service"])
    async def health() -> dict[str, object]:
        """Liveness: answers once the service is started."""
        return {"status": "ok", "chains": sorted(services.chains)}

    app.include_router(operations_routes(services, ready, metrics, metrics_token=metrics_token))
    app.include_router(chain_router)
    app.include_router(op_routes())
    app.include_router(platform_routes())
    app.include_router(billing_routes())
    app.include_router(admin_routes())
    app.include_router(policy_routes())
    app.include_router(task_routes())
    app.include_router(webhook_routes())
    app.include_router(notary_routes())
    app.include_router(wallet_routes())
    app.include_router(request_log_routes())
    return app


def _is_json_rpc(path: str) -> bool:
    return path.startswith("/rpc/")
