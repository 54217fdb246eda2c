"""Trends of credit use: the days, ISO weeks or months to show (quiet ones at zero), and
what each period of the billing cycle still ahead is expected to total at the current pace,
the cycle forecast (`entryway.domain.billing.forecast`) spread over those periods."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from entryway.domain.credits import add_months
from entryway.storage.usage import period_of

TREND_GROUPINGS = ("day", "week", "month")
HISTORY = {"day": 30, "week": 12, "month": 12}  # periods shown up to the current one


@dataclass(frozen=True, slots=True)
class Period:
    label: str  # as the usage breakdown names it
    start: datetime
    end: datetime


def period_start(moment: datetime, grouping: str) -> datetime:
    day = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    if grouping == "day":
        return day
    if grouping == "week":
        return day - timedelta(days=day.weekday())  # ISO weeks start on Monday
    if grouping == "month":
        return day.replace(day=1)
    raise ValueError(f"grouping must be one of {', '.join(TREND_GROUPINGS)}")


def next_start(start: datetime, grouping: str) -> datetime:
    if grouping == "day":
        return start + timedelta(days=1)
    if grouping == "week":
        return start + timedelta(weeks=1)
    return add_months(start, 1)


def previous_start(start: datetime, grouping: str) -> datetime:
    if grouping == "day":
        return start - timedelta(days=1)
    if grouping == "week":
        return start - timedelta(weeks=1)
    return add_months(start, -1)


def periods(grouping: str, now: datetime, through: datetime | None = None) -> list[Period]:
    """The last HISTORY[grouping] periods up to the one holding `now`, then those up to the
    one holding the instant before `through` (the cycle's end) when that is later."""
    first = period_start(now, grouping)
    for _ in range(HISTORY[grouping] - 1):
        first = previous_start(first, grouping)
    last = period_start(max(now, (through or now) - timedelta(microseconds=1)), grouping)
    found = []
    start = first
    while start <= last:
        end = next_start(start, grouping)
        found.append(Period(period_of(start, grouping), start, end))
        start = end
    return found


def _seconds(start: datetime, end: datetime) -> int:
    return max(int((end - start).total_seconds()), 0)


def spread_forecast(
    shown: list[Period],
    actual: Mapping[str, int],
    now: datetime,
    cycle_end: datetime,
    still_to_use: int,
) -> dict[str, int]:
    """{label: expected total} for each period from the current one to the cycle's end:
    what it has used so far plus its share, by time, of the `still_to_use` credits the
    forecast expects before the cycle ends. Empty once the cycle has ended."""
    ahead = _seconds(now, cycle_end)
    if ahead == 0:
        return {}
    expected = {}
    for p in shown:
        if p.end <= now or p.start >= cycle_end:
            continue
        share = _seconds(max(p.start, now), min(p.end, cycle_end))
        expected[p.label] = actual.get(p.label, 0) + max(still_to_use, 0) * share // ahead
    return expected
