"""Trend periods (quiet ones at zero) and the cycle forecast spread over the periods left."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from entryway.dashboard.usage_trends import HISTORY, period_start, periods, spread_forecast

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)  # a Tuesday


def test_daily_periods_run_30_days_up_to_today_then_to_the_cycle_end() -> None:
    shown = periods("day", NOW, datetime(2026, 11, 28, tzinfo=UTC))
    labels = [p.label for p in shown]
    assert labels[0] == "2026-10-26"
    assert labels[29] == "2026-11-24"
    assert labels[-1] == "2026-11-27"  # the cycle ends at the start of the 28th
    assert all(a.end == b.start for a, b in pairwise(shown))


def test_weeks_are_iso_weeks_starting_on_monday() -> None:
    shown = periods("week", NOW)
    assert len(shown) == HISTORY["week"]
    assert shown[-1].label == "2026-W48"
    assert shown[-1].start == datetime(2026, 11, 23, tzinfo=UTC)


def test_months_cross_the_year() -> None:
    shown = periods("month", NOW, datetime(2027, 1, 5, tzinfo=UTC))
    assert [p.label for p in shown[-3:]] == ["2026-11", "2026-12", "2027-01"]
    assert shown[0].label == "2025-12"


def test_the_forecast_adds_the_rest_of_the_cycle_to_the_periods_left() -> None:
    shown = periods("day", NOW, datetime(2026, 11, 26, tzinfo=UTC))
    # 36 hours left: 12 today, 24 tomorrow; 360 credits expected in them
    expected = spread_forecast(shown, {"2026-11-24": 50}, NOW, shown[-1].end, 360)
    assert expected == {"2026-11-24": 50 + 120, "2026-11-25": 240}


def test_no_forecast_once_the_cycle_has_ended() -> None:
    shown = periods("day", NOW)
    assert spread_forecast(shown, {}, NOW, NOW - timedelta(days=1), 100) == {}


@given(
    st.integers(min_value=0, max_value=10**12),
    st.integers(min_value=1, max_value=40 * 24),
    st.sampled_from(["day", "week", "month"]),
)
def test_the_spread_never_promises_more_than_the_forecast(
    still_to_use: int, hours_left: int, grouping: str
) -> None:
    end = NOW + timedelta(hours=hours_left)
    shown = periods(grouping, NOW, end)
    expected = spread_forecast(shown, {}, NOW, end, still_to_use)
    total = sum(expected.values())
    assert total <= still_to_use
    assert still_to_use - total < len(expected) + 1  # only rounding is lost
    assert period_start(NOW, grouping).strftime("%Y") == "2026"
