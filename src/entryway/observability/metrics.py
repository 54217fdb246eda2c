"""Prometheus metrics of one service instance, in a registry the app owns (so that several
apps in one process, as in tests, never share or collide).

Two kinds: what happens inside a request or a delivery is counted as it happens
(`RequestMetrics`, `webhook_delivery_failed`); what the service *is* (mempools, queues,
totals kept by the bundlers, the meter and the node clients) is read when scraped, handed in
as ready-made families, so those components know nothing of Prometheus.

Labels are bounded: the route template (`/v1/tasks/{task_id}`), never the raw path; the
operation kind, never the project."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CONTENT_TYPE = CONTENT_TYPE_LATEST
UNMATCHED_ROUTE = "unmatched"  # a path no route serves (404s): one label, whatever the path
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class _ScrapedFamilies(Collector):
    """The families read at scrape time, set just before the registry is rendered."""

    def __init__(self) -> None:
        self.families: Sequence[Metric] = ()

    def collect(self) -> Iterable[Metric]:
        return list(self.families)

    def describe(self) -> Iterable[Metric]:
        return []  # names vary with what is running; nothing to check at registration


class ServiceMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "entryway_http_requests",
            "HTTP requests answered, by method, route template and status code.",
            ("method", "route", "status"),
            registry=self.registry,
        )
        self.latency = Histogram(
            "entryway_http_request_duration_seconds",
            "Time to answer an HTTP request, by method and route template.",
            ("method", "route"),
            registry=self.registry,
        )
        self.webhook_failures = Counter(
            "entryway_webhook_delivery_failures",
            "Webhook delivery attempts that did not deliver, by outcome "
            "(failed, gone, refused), in the workers of this process.",
            ("outcome",),
            registry=self.registry,
        )
        self._scraped = _ScrapedFamilies()
        self.registry.register(self._scraped)

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        method = method if method in _METHODS else "OTHER"
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(method, route).observe(seconds)

    def webhook_delivery_failed(self, outcome: str) -> None:
        """For WebhookDeliveryHandler(on_failure=...)."""
        self.webhook_failures.labels(str(outcome)).inc()

    def render(self, scraped: Sequence[Metric]) -> bytes:
        """The text exposition: the counters above with `scraped`, read just now."""
        self._scraped.families = scraped
        try:
            return generate_latest(self.registry)
        finally:
            self._scraped.families = ()


def route_template(scope: Scope) -> str:
    """The template of the route that served the request, as routing left it in the scope."""
    path = getattr(scope.get("route"), "path", None)
    return path if isinstance(path, str) else UNMATCHED_ROUTE


class RequestMetrics:
    """Counts and times every HTTP answer. Outermost, so that it sees what the client saw,
    the edge's 500s and the body guard's 413s included."""

    def __init__(self, app: ASGIApp, *, metrics: ServiceMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the server answers if nothing was sent

        async def send_seen(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_seen)
        finally:
            elapsed = time.perf_counter() - started
            self.metrics.observe_request(scope["method"], route_template(scope), status, elapsed)
