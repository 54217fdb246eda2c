"""The operator endpoint of a process that serves no API (the bundler of a chain bundled
from the intake, leader or standby, and the task worker): /healthz, /readyz and /metrics,
answered as the API answers them (docs/operations.md).

What differs from process to process is handed in as a `ProcessProbe`: what the process is
doing (a bundler's role), its readiness checks and the metric families it reads when
scraped."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client.metrics_core import Metric
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from entryway.observability.metrics import CONTENT_TYPE, RequestMetrics, ServiceMetrics
from entryway.observability.readiness import Readiness, ReadinessReport
from entryway.service.scrape_access import bearer_matches, may_scrape, metrics_token_required


@dataclass(frozen=True, slots=True)
class ProcessProbe:
    readiness: Readiness
    # What the process is doing, at the head of /healthz and /readyz: {"role": "leader"}.
    describe: Callable[[], Mapping[str, object]]
    families: Callable[[], Awaitable[Sequence[Metric]]]  # read at each scrape
    metrics: ServiceMetrics
    metrics_token: str | None = None
    operator_token: str | None = None  # opens /metrics too, and the details of /readyz


def readiness_answer(
    report: ReadinessReport,
    readiness: Readiness,
    *,
    detailed: bool,
    describe: Mapping[str, object] | None = None,
) -> JSONResponse:
    """200 naming each check, or 503 with Retry-After naming the failing ones; a check the
    process serves without is named under `degraded` either way; a check's detail only when
    `detailed` (the caller holds the operator token)."""
    body: dict[str, object] = {
        **(describe or {}),
        "status": "ready" if report.ready else "not_ready",
        "checks": {
            c.name: {"ok": c.ok, **({"detail": c.detail} if detailed else {})}
            for c in report.checks
        },
    }
    if report.degraded:
        body["degraded"] = report.degraded
    if report.ready:
        return JSONResponse(body)
    body["failing"] = report.failing
    retry = str(max(math.ceil(readiness.cache_s), 1))
    return JSONResponse(body, status_code=503, headers={"Retry-After": retry})


def process_app(probe: ProcessProbe) -> RequestMetrics:
    async def health(_: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", **probe.describe()})

    async def ready(request: Request) -> JSONResponse:
        report = await probe.readiness.report()
        detailed = bearer_matches(request, (probe.operator_token,))
        return readiness_answer(
            report, probe.readiness, detailed=detailed, describe=probe.describe()
        )

    async def scrape(request: Request) -> Response:
        if not may_scrape(request, (probe.metrics_token, probe.operator_token)):
            return metrics_token_required().response(request.url.path)
        content = probe.metrics.render(await probe.families())
        return Response(content, media_type=CONTENT_TYPE)

    routes = [
        Route("/healthz", health, methods=["GET"]),
        Route("/readyz", ready, methods=["GET"]),
        Route("/metrics", scrape, methods=["GET"]),
    ]
    return RequestMetrics(Starlette(routes=routes), metrics=probe.metrics)
