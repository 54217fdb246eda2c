"""Operator endpoints beside /healthz: /readyz for load balancers, /metrics for Prometheus.

/readyz is open, as /healthz is: a load balancer has no token. Its public answer names each
check and whether it passed; the details (amounts, addresses, which node) only go to a
caller with the operator token, as chain internals are the operator's business.

/metrics answers a scraper on the same host (loopback, and no proxy's forwarding header:
a reverse proxy on the host would otherwise make every visitor look local), or anyone with
the metrics token or the operator token."""

from __future__ import annotations

import hmac
import math
from collections.abc import Iterable

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from entryway.observability.metrics import CONTENT_TYPE, ServiceMetrics
from entryway.observability.readiness import Readiness
from entryway.service.metrics_scrape import scraped_families
from entryway.service.problems import Problem
from entryway.service.services import Services

_LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})
_FORWARDING_HEADERS = ("forwarded", "x-forwarded-for", "x-real-ip")


def operations_routes(
    services: Services,
    readiness: Readiness,
    metrics: ServiceMetrics,
    *,
    metrics_token: str | None = None,
) -> APIRouter:
    router = APIRouter(tags=["service"])

    @router.get("/readyz", operation_id="readiness", responses={503: {"description": "Not ready"}})
    async def ready(request: Request) -> JSONResponse:
        """Readiness: 200 when the database, Redis (if used) and every chain's node,
        executor balances and paymaster deposit pass their checks; else 503 naming those
        that fail. Checked at most every couple of seconds, whoever asks."""
        report = await readiness.report()
        detailed = _bearer_matches(request, (services.admin_token,))
        body: dict[str, object] = {
            "status": "ready" if report.ready else "not_ready",
            "checks": {
                c.name: {"ok": c.ok, **({"detail": c.detail} if detailed else {})}
                for c in report.checks
            },
        }
        if report.ready:
            return JSONResponse(body)
        body["failing"] = report.failing
        retry = str(max(math.ceil(readiness.cache_s), 1))
        return JSONResponse(body, status_code=503, headers={"Retry-After": retry})

    @router.get("/metrics", operation_id="metrics", response_class=Response)
    async def scrape(request: Request) -> Response:
        """Prometheus metrics (text exposition format)."""
        if not _local(request) and not _bearer_matches(
            request, (metrics_token, services.admin_token)
        ):
            raise Problem(
                401,
                "metrics_token_required",
                "Metrics token required",
                "scrape from this host, or send Authorization: Bearer <metrics token>",
            )
        content = metrics.render(await scraped_families(services))
        return Response(content, media_type=CONTENT_TYPE)

    return router


def _bearer_matches(request: Request, tokens: Iterable[str | None]) -> bool:
    header = request.headers.get("authorization", "")
    if not header.lower().startswith("bearer "):
        return False
    presented = header[7:].strip().encode()
    return any(t and hmac.compare_digest(presented, t.encode()) for t in tokens)


def _local(request: Request) -> bool:
    if request.client is None or request.client.host not in _LOOPBACK:
        return False
    return not any(h in request.headers for h in _FORWARDING_HEADERS)
