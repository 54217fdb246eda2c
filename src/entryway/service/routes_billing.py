"""Credits, usage, invoices and alerts of the caller's project (requirements §3, §8.3, §8.4):
balance and lots, consumption rate and forecast, breakdowns by operation, key, endpoint,
chain, day, week or month, CSV and JSON export. All reads are free."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse

from entryway.domain.billing import forecast, forecast_window, low_balance_threshold
from entryway.domain.plans import plan
from entryway.service.auth import CurrentCaller
from entryway.service.problems import Problem
from entryway.service.schemas import (
    AlertOut,
    CreditsOut,
    ForecastBasisOut,
    InvoiceOut,
    LotOut,
    Moment,
    UsageGroup,
    UsageOut,
)
from entryway.service.services import Services
from entryway.service.usage_export import (
    ExportFormat,
    UsageWindowError,
    export_response,
    key_names,
    usage_window,
)
from entryway.storage.billing import StoredInvoice
from entryway.storage.usage import GROUPINGS

Grouping = Literal["operation", "key", "endpoint", "chain", "day", "week", "month"]
assert set(GROUPINGS) == set(Grouping.__args__)  # type: ignore[attr-defined]


def invoice_out(s: StoredInvoice) -> InvoiceOut:
    inv = s.invoice
    return InvoiceOut(
        invoice_id=s.invoice_id,
        plan=inv.plan,
        cycle_start=inv.cycle_start,
        cycle_end=inv.cycle_end,
        plan_price_micro_eur=inv.plan_price_micro_eur,
        overage_credits=inv.overage_credits,
        overage_micro_eur=inv.overage_micro_eur,
        total_micro_eur=inv.total_micro_eur,
    )


def _window(since: datetime | None, until: datetime | None) -> tuple[datetime, datetime]:
    """[since, until): both already in UTC and within the accepted years (`Moment`)."""
    try:
        return usage_window(since, until, datetime.now(UTC))
    except UsageWindowError as exc:
        raise Problem(422, "validation_error", "Invalid window", str(exc)) from None


def billing_routes() -> APIRouter:
    router = APIRouter(prefix="/v1", tags=["credits"])

    @router.get("/credits", operation_id="getCredits")
    async def credits(who: CurrentCaller, request: Request) -> CreditsOut:
        """Balance, lots (oldest first, consumed first), this cycle's use, overage, the
        spending budget and a forecast to the cycle's end at the last week's daily pace,
        with its basis."""
        services: Services = request.app.state.services
        now = datetime.now(UTC)
        project = await services.store.project(who.project_id)
        account = await services.store.credit_account(who.project_id)
        sub = project.subscription
        used = await services.platform.usage.used_since(who.project_id, sub.cycle_start)
        balance = account.balance(now)
        window_start = forecast_window(project.created_at, now)
        window_used = await services.platform.usage.used_since(who.project_id, window_start)
        outlook = forecast(
            sub, used, balance, now, window_start=window_start, window_used=window_used
        )
        days = max((now - sub.cycle_start).days, 0) + 1
        p = plan(project.plan)
        config = services.platform.billing.config_for(project)  # its ENTERPRISE terms
        services.platform.meter.count_read(who, "credits")
        return CreditsOut(
            balance=balance,
            plan=project.plan,
            monthly_credits=config.monthly_grant(p),
            cycle_start=sub.cycle_start,
            cycle_end=sub.cycle_end,
            used_this_cycle=used,
            overage_this_cycle=project.cycle_overage,
            consumption_per_day=used // days,
            forecast_cycle_usage=outlook.projected,
            forecast_overage=outlook.projected_overage,
            forecast_basis=ForecastBasisOut(
                window_start=outlook.basis.start,
                window_end=outlook.basis.end,
                days=outlook.basis.days,
                credits=outlook.basis.credits,
                credits_per_day=outlook.basis.credits_per_day,
                method=outlook.basis.method,
            ),
            low_balance_threshold=low_balance_threshold(p, config, project.low_balance_credits),
            overage_budget=project.overage_budget,
            lots=[
                LotOut(
                    lot_id=lot.lot_id,
                    kind=lot.kind.value,
                    amount=lot.amount,
                    remaining=lot.remaining,
                    granted_at=lot.granted_at,
                    expires_at=lot.expires_at,
                    expired=now >= lot.expires_at,
                )
                for lot in account.lots
            ],
        )

    @router.get("/usage", operation_id="getUsage")
    async def usage(
        who: CurrentCaller,
        request: Request,
        group_by: Annotated[Grouping, Query(alias="groupBy")] = "operation",
        since: Moment | None = None,
        until: Moment | None = None,
    ) -> UsageOut:
        """Credits, priced operations and free requests in [since, until) (default: the last
        30 days), grouped by operation type, API key, endpoint, chain, day, week or month."""
        services: Services = request.app.state.services
        start, end = _window(since, until)
        await services.platform.meter.flush()  # this process's latest counts included
        groups = await services.platform.usage.breakdown(who.project_id, start, end, group_by)
        services.platform.meter.count_read(who, "usage")
        return UsageOut(
            since=start,
            until=end,
            group_by=group_by,
            groups={k: UsageGroup(**v) for k, v in groups.items()},
            total_credits=sum(v["credits"] for v in groups.values()),
        )

    @router.get(
        "/usage/export",
        operation_id="exportUsage",
        responses={200: {"content": {"text/csv": {}, "application/json": {}}}},
    )
    async def export(
        who: CurrentCaller,
        request: Request,
        format: ExportFormat = "csv",
        since: Moment | None = None,
        until: Moment | None = None,
    ) -> StreamingResponse:
        """Every usage event in [since, until), oldest first, as CSV or JSON (streamed)."""
        services: Services = request.app.state.services
        start, end = _window(since, until)
        services.platform.meter.count_read(who, "usage-export")
        names = key_names(await services.store.keys(who.project_id))
        usage = services.platform.usage
        return export_response(usage, who.project_id, start, end, format, names)

    @router.get("/invoices", operation_id="listInvoices")
    async def list_invoices(who: CurrentCaller, request: Request) -> list[InvoiceOut]:
        """One invoice per closed cycle: the plan's price plus overage, in micro-euros."""
        services: Services = request.app.state.services
        return [invoice_out(s) for s in await services.platform.billing.invoices(who.project_id)]

    @router.get("/alerts", operation_id="listAlerts")
    async def list_alerts(who: CurrentCaller, request: Request) -> list[AlertOut]:
        """Low-balance, overage and budget alerts, newest first (at most one of a kind per
        cycle)."""
        services: Services = request.app.state.services
        await services.platform.meter.check_due_alerts()  # this process's latest charges
        return [
            AlertOut(
                alert_id=a.alert_id,
                kind=a.kind,
                cycle_start=a.cycle_start,
                detail=a.detail,
                created_at=a.created_at,
            )
            for a in await services.platform.billing.alerts(who.project_id)
        ]

    return router
