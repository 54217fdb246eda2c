"""What the usage pages show, read through the same stores and rules as `/v1/credits` and
`/v1/usage`: the live figures (balance, this cycle's use and overage, the consumption rate,
the cycle forecast), breakdowns, and trends with the forecast spread over the periods left."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta

from entryway.dashboard.charts import Bar
from entryway.dashboard.names import usage_label
from entryway.dashboard.usage_trends import Period, periods, spread_forecast
from entryway.domain.billing import forecast, forecast_window
from entryway.service.services import Services
from entryway.storage.apikeys import KeyInfo
from entryway.storage.store import Project
from entryway.storage.usage import UsageQueries

RATE_WINDOW = timedelta(hours=1)  # the consumption rate is the use of the last hour
Groups = dict[str, dict[str, int]]  # {label: {"credits", "operations", "requests"}}


@dataclass(frozen=True, slots=True)
class LiveFigures:
    balance: int
    used_this_cycle: int
    overage: int  # credits used beyond the balance this cycle, billed at the cycle's end
    per_hour: int  # credits per hour over RATE_WINDOW
    per_day: int  # this cycle's use over its days so far, today counted whole (`/v1/credits`)
    forecast_usage: int  # this cycle's use by its end at the last week's daily pace
    forecast_overage: int

    def as_event(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class GroupRow:
    label: str
    credits: int
    operations: int
    requests: int


@dataclass
class Trend:
    grouping: str
    shown: list[Period]
    actual: dict[str, int] = field(default_factory=dict)
    expected: dict[str, int] = field(default_factory=dict)  # periods with a forecast

    @property
    def bars(self) -> list[Bar]:
        return [Bar(p.label, self.actual.get(p.label, 0)) for p in self.shown]

    @property
    def forecast(self) -> list[int | None]:
        return [self.expected.get(p.label) for p in self.shown]

    @property
    def rows(self) -> list[tuple[str, int, int | None]]:
        return [(b.label, b.value, f) for b, f in zip(self.bars, self.forecast, strict=True)]


async def live_figures(services: Services, project_id: str, now: datetime) -> LiveFigures:
    store = services.store
    usage = services.platform.usage
    project = await store.project(project_id)
    account = await store.credit_account(project_id)
    sub = project.subscription
    used = await usage.used_since(project_id, sub.cycle_start)
    balance = account.balance(now)
    window_start = forecast_window(project.created_at, now)
    window_used = await usage.used_since(project_id, window_start)
    outlook = forecast(sub, used, balance, now, window_start=window_start, window_used=window_used)
    recent = await usage.used_since(project_id, now - RATE_WINDOW)
    return LiveFigures(
        balance=balance,
        used_this_cycle=used,
        overage=project.cycle_overage,
        per_hour=recent * 3600 // int(RATE_WINDOW.total_seconds()),
        per_day=used // (max((now - sub.cycle_start).days, 0) + 1),
        forecast_usage=outlook.projected,
        forecast_overage=outlook.projected_overage,
    )


def rows(groups: Groups) -> list[GroupRow]:
    """Groups as table rows, the largest use first."""
    found = [GroupRow(k, v["credits"], v["operations"], v["requests"]) for k, v in groups.items()]
    return sorted(found, key=lambda r: (-r.credits, -r.operations - r.requests, r.label))


def named_keys(groups: Groups, keys: Iterable[KeyInfo]) -> Groups:
    """Usage by key, each key shown by its name (and id) where it has one."""
    names = {k.key_id: f"{k.name} ({k.key_id})" for k in keys if k.name}
    return {names.get(label, label): figures for label, figures in groups.items()}


def chart_bars(found: list[GroupRow], limit: int = 10) -> list[Bar]:
    return [Bar(usage_label(r.label), r.credits) for r in found[:limit]]


def combined(all_groups: Iterable[Groups]) -> Groups:
    total: Groups = {}
    for groups in all_groups:
        for label, figures in groups.items():
            into = total.setdefault(label, {"credits": 0, "operations": 0, "requests": 0})
            for name, value in figures.items():
                into[name] = into.get(name, 0) + value
    return total


async def project_trend(
    usage: UsageQueries,
    project: Project,
    figures: LiveFigures,
    grouping: str,
    now: datetime,
    shown: list[Period] | None = None,
) -> Trend:
    """Credits per period, and what the periods from now to the cycle's end are expected to
    use: the cycle forecast's credits still to use (`entryway.domain.billing.forecast`)."""
    sub = project.subscription
    shown = shown or periods(grouping, now, sub.cycle_end)
    groups = await usage.breakdown(project.project_id, shown[0].start, now, grouping)
    actual = {label: g["credits"] for label, g in groups.items()}
    still_to_use = max(figures.forecast_usage - figures.used_this_cycle, 0)
    expected = spread_forecast(shown, actual, now, sub.cycle_end, still_to_use)
    return Trend(grouping, shown, actual, expected)


def summed(trends: list[Trend], grouping: str, shown: list[Period]) -> Trend:
    """Several projects' trends as one: a period's forecast is the sum of each project's
    forecast there, or of what it used there when its cycle has no forecast for it."""
    actual: dict[str, int] = {}
    for t in trends:
        for label, credits in t.actual.items():
            actual[label] = actual.get(label, 0) + credits
    expected: dict[str, int] = {}
    forecast_labels = {label for t in trends for label in t.expected}
    for label in forecast_labels:
        expected[label] = sum(t.expected.get(label, t.actual.get(label, 0)) for t in trends)
    return Trend(grouping, shown, actual, expected)


def window_total(groups: Mapping[str, Mapping[str, int]]) -> int:
    return sum(g["credits"] for g in groups.values())
