"""What the settings say about serving and watching a process: the HTTP app with its limits,
readiness thresholds, metrics registry and token, and the log set-up (docs/operations.md)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import FastAPI
from limits import parse as parse_rate

from entryway.composition.root import request_limits
from entryway.dashboard.app import install_dashboard
from entryway.dashboard.sign_in_guard import SignInLimits
from entryway.dashboard.web import DashboardOptions
from entryway.domain.throttle import Rate
from entryway.observability.logs import configure_logging
from entryway.observability.metrics import ServiceMetrics
from entryway.service.app import create_app
from entryway.service.http_connections import ConnectionLimits, server_options
from entryway.service.readiness_checks import ReadinessSettings
from entryway.service.services import Services
from entryway.settings.model import Settings


def readiness_settings(settings: Settings) -> ReadinessSettings:
    given = settings.readiness
    return ReadinessSettings(
        executor_min_wei=given.executor_min_wei, deposit_min_wei=given.deposit_min_wei
    )


def connection_limits(settings: Settings) -> ConnectionLimits:
    """`[http]`'s bounds on a connection (docs/security.md, "Connections")."""
    given = settings.http
    return ConnectionLimits(
        max_request_line_bytes=given.max_request_line_bytes,
        max_header_bytes=given.max_header_bytes,
        header_timeout_s=given.header_timeout_s,
        body_timeout_s=given.body_timeout_s,
        body_min_rate=given.body_min_rate,
        keep_alive_timeout_s=given.keep_alive_timeout_s,
        send_timeout_s=given.send_timeout_s,
        max_connections=given.max_connections,
        max_connections_per_client=given.max_connections_per_client,
    )


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """What `uvicorn.run` takes besides the app and the address, for every API server."""
    return {
        **server_options(connection_limits(settings)),
        "log_level": "warning",
        "log_config": None,
    }


def http_app(
    settings: Settings,
    services: Services,
    lifespan: Callable[[FastAPI], AbstractAsyncContextManager[None]],
) -> FastAPI:
    """The API over `services`, as the settings configure it, with the dashboard unless
    `dashboard.enabled` is off. Its metrics registry is made
    here and kept on `app.state.metrics`: the lifespan hands it to what runs in the process
    beside the app (the embedded worker counts its failed webhook deliveries there)."""
    token = settings.metrics_token
    app = create_app(
        services,
        lifespan,
        limits=request_limits(settings),
        readiness=readiness_settings(settings),
        metrics=ServiceMetrics(),
        metrics_token=token.get_secret_value() if token is not None else None,
    )
    if settings.dashboard.enabled:
        install_dashboard(app, dashboard_options(settings))
    return app


def _rate(text: str) -> Rate:
    item = parse_rate(text)
    return Rate(item.amount, item.get_expiry())


def public_url(settings: Settings) -> str:
    """`http.public_url`, else the address this process serves on: links handed out never
    take the request's Host header, which whoever sends the request chooses."""
    if settings.http.public_url is not None:
        return settings.http.public_url
    host = settings.http.host
    if host in ("", "0.0.0.0", "::"):  # noqa: S104 - every interface, loopback among them
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{settings.http.port}"


def dashboard_options(settings: Settings) -> DashboardOptions:
    given = settings.dashboard
    limits = SignInLimits(
        per_address=_rate(given.sign_in_per_address),
        per_account=_rate(given.sign_in_per_account),
        operator_per_address=_rate(given.operator_sign_in_per_address),
        hashing_threads=given.password_hashing_threads,
        hashing_queue=given.password_hashing_queue,
    )
    return DashboardOptions(
        secure_cookies=given.secure_cookies, public_url=public_url(settings), sign_in=limits
    )


def configure_process_logging(settings: Settings) -> None:
    """`log.format` (default: JSON lines unless stderr is a terminal) at `log.level`."""
    configure_logging(settings.log.json_lines, settings.log.level)
