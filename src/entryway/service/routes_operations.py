"""Operator endpoints beside /healthz: /readyz for load balancers, /metrics for Prometheus.

/readyz is open, as /healthz is: a load balancer has no token. Its public answer names each
check and whether it passed; the details (amounts, addresses, which node) only go to a
caller with the operator token, as chain internals are the operator's business.

/metrics answers a scraper on the same host, or anyone with the metrics token or the operator
token (`scrape_access`, the rule of every process's /metrics)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from entryway.observability.metrics import CONTENT_TYPE, ServiceMetrics
from entryway.observability.readiness import Readiness
from entryway.service.metrics_scrape import scraped_families
from entryway.service.process_endpoint import readiness_answer
from entryway.service.scrape_access import bearer_matches, may_scrape, metrics_token_required
from entryway.service.services import Services


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
        detailed = bearer_matches(request, (services.admin_token,))
        return readiness_answer(report, readiness, detailed=detailed)

    @router.get("/metrics", operation_id="metrics", response_class=Response)
    async def scrape(request: Request) -> Response:
        """Prometheus metrics (text exposition format)."""
        if not may_scrape(request, (metrics_token, services.admin_token)):
            raise metrics_token_required()
        content = metrics.render(await scraped_families(services))
        return Response(content, media_type=CONTENT_TYPE)

    return router
