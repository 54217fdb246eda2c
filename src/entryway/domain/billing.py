"""Billing cycles: a project's plan, the month it is in, the plan change waiting for the next
cycle, and what closing a cycle produces (an invoice and the next month's grant). Pure.

A cycle runs one calendar month from its start (the project's creation, then each close).
Plan changes, up or down, are scheduled and take effect when the next cycle starts
(requirements §3). Overage (credits used beyond the lots) is billed at the closing plan's rate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from entryway.domain.credits import CreditError, add_months, check_amount
from entryway.domain.plans import Plan, PlanName, plan

LOW_BALANCE_SHARE = 10  # percent of the monthly grant under which a low-balance alert fires
# Percent of a project's spending budget at which its budget alert fires, before it bites.
BUDGET_ALERT_PERCENT = 80


@dataclass(frozen=True, slots=True)
class EnterpriseTerms:
    """One project's ENTERPRISE contract: its monthly price (micro-euros, VAT included) and
    monthly credits; None leaves the service-wide value (`BillingConfig`) in force."""

    monthly_micro_eur: int | None = None
    monthly_credits: int | None = None

    def __post_init__(self) -> None:
        if self.monthly_micro_eur is not None:
            check_amount(self.monthly_micro_eur, "the ENTERPRISE monthly price")
        if self.monthly_credits is not None:
            check_amount(self.monthly_credits, "the ENTERPRISE monthly credits")


@dataclass(frozen=True, slots=True)
class BillingConfig:
    """Operator settings. Overage rates are micro-euros per credit, per plan (the plans' own
    1 EUR per million unless configured); ENTERPRISE's price and grant are per contract.

    Overage is never capped by the service: operations go on past the monthly credits and
    the overage is billed at the cycle's close. Only a project's owner may cap it, with a
    spending budget; `budget_alert_percent` is the share of that budget at which the
    project is warned."""

    overage_micro_eur_per_credit: Mapping[PlanName, int] = field(default_factory=dict)
    enterprise_monthly_micro_eur: int = 0
    enterprise_monthly_credits: int = 0
    budget_alert_percent: int = BUDGET_ALERT_PERCENT

    def __post_init__(self) -> None:
        check_amount(self.enterprise_monthly_credits, "the ENTERPRISE monthly credits")
        if not 1 <= self.budget_alert_percent <= 100:
            raise CreditError("budget_alert_percent must be from 1 to 100")

    def with_terms(self, terms: EnterpriseTerms) -> BillingConfig:
        """This configuration for one project: its own ENTERPRISE price and grant, where the
        operator set them, instead of the service-wide ones."""
        price, credits = terms.monthly_micro_eur, terms.monthly_credits
        if price is None:
            price = self.enterprise_monthly_micro_eur
        if credits is None:
            credits = self.enterprise_monthly_credits
        return replace(self, enterprise_monthly_micro_eur=price, enterprise_monthly_credits=credits)

    def budget_alert_due(self, cycle_overage: int, budget: int | None) -> bool:
        """Whether a cycle's overage has reached the alert share of the project's budget
        (never without a budget, nor before there is any overage)."""
        if budget is None or cycle_overage <= 0:
            return False
        return cycle_overage * 100 >= budget * self.budget_alert_percent

    def overage_rate(self, p: Plan) -> int:
        return self.overage_micro_eur_per_credit.get(p.name, p.overage_micro_eur_per_credit)

    def monthly_price(self, p: Plan) -> int:
        if p.monthly_price_micro_eur is None:
            return self.enterprise_monthly_micro_eur
        return p.monthly_price_micro_eur

    def monthly_grant(self, p: Plan) -> int:
        if p.monthly_credits is None:
            return self.enterprise_monthly_credits
        return p.monthly_credits


@dataclass(frozen=True, slots=True)
class Invoice:
    plan: PlanName
    cycle_start: datetime
    cycle_end: datetime
    plan_price_micro_eur: int
    overage_credits: int
    overage_micro_eur: int

    @property
    def total_micro_eur(self) -> int:
        return self.plan_price_micro_eur + self.overage_micro_eur


@dataclass(frozen=True, slots=True)
class Subscription:
    plan: PlanName
    cycle_start: datetime
    next_plan: PlanName | None = None

    @property
    def cycle_end(self) -> datetime:
        return add_months(self.cycle_start, 1)

    def due(self, at: datetime) -> bool:
        return at >= self.cycle_end

    def change_plan(self, to: PlanName) -> Subscription:
        """Schedule a change for the next cycle; back to the current plan cancels it."""
        return Subscription(self.plan, self.cycle_start, None if to == self.plan else to)


@dataclass(frozen=True, slots=True)
class CycleClose:
    invoice: Invoice
    next: Subscription
    grant: int  # credits of the new cycle's lot (0: none)


def close_cycle(sub: Subscription, overage_credits: int, config: BillingConfig) -> CycleClose:
    """Invoice the ending cycle at its plan, start the next one on the scheduled plan."""
    closing = plan(sub.plan)
    invoice = Invoice(
        plan=sub.plan,
        cycle_start=sub.cycle_start,
        cycle_end=sub.cycle_end,
        plan_price_micro_eur=config.monthly_price(closing),
        overage_credits=overage_credits,
        overage_micro_eur=overage_credits * config.overage_rate(closing),
    )
    next_plan = sub.next_plan or sub.plan
    nxt = Subscription(next_plan, sub.cycle_end)
    return CycleClose(invoice, nxt, config.monthly_grant(plan(next_plan)))


# The forecast's pace: the daily average over the last week of use (or the project's whole
# history, when younger), never divided by less than one day, so a cycle's first minutes are
# not multiplied into a whole month.
FORECAST_WINDOW = timedelta(days=7)
FORECAST_MIN_HISTORY = timedelta(days=1)
FORECAST_METHOD = "daily_average"
SECONDS_PER_DAY = 86_400


@dataclass(frozen=True, slots=True)
class ForecastBasis:
    """What a forecast extrapolates from: the credits used in [start, end), spread over
    `seconds` (the window, at least `FORECAST_MIN_HISTORY`)."""

    start: datetime
    end: datetime
    seconds: int
    credits: int
    method: str = FORECAST_METHOD

    @property
    def days(self) -> float:
        return round(self.seconds / SECONDS_PER_DAY, 2)

    @property
    def credits_per_day(self) -> int:
        return self.credits * SECONDS_PER_DAY // self.seconds


@dataclass(frozen=True, slots=True)
class Forecast:
    used: int  # credits used so far this cycle
    projected: int  # at the basis's pace, by the cycle's end
    projected_overage: int
    basis: ForecastBasis


def forecast_window(history_start: datetime, at: datetime) -> datetime:
    """Where the forecast's window starts: a week back, or where the history starts."""
    return max(at - FORECAST_WINDOW, min(history_start, at))


def forecast(
    sub: Subscription,
    used: int,
    balance: int,
    at: datetime,
    *,
    window_start: datetime,
    window_used: int,
) -> Forecast:
    """This cycle's use by its end: `used` so far plus the window's daily pace over the
    time left. `window_used` is the credits used since `window_start` (`forecast_window`)."""
    span = max(int((at - window_start).total_seconds()), 0)
    seconds = max(span, int(FORECAST_MIN_HISTORY.total_seconds()))
    basis = ForecastBasis(window_start, at, seconds, max(window_used, 0))
    left = max(int((sub.cycle_end - at).total_seconds()), 0)
    projected = used + basis.credits * left // seconds
    still_to_use = projected - used
    return Forecast(used, projected, max(still_to_use - balance, 0), basis)


def low_balance_threshold(p: Plan, config: BillingConfig, configured: int | None) -> int:
    if configured is not None:
        return configured
    return config.monthly_grant(p) * LOW_BALANCE_SHARE // 100
