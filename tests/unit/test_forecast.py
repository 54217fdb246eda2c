"""The cycle forecast of /v1/credits: extrapolated from the last week's daily use (or the
history there is), never from less than one day, and stating what it is based on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from entryway.domain.billing import Subscription, forecast, forecast_window
from entryway.domain.plans import PlanName, plan

START = datetime(2026, 11, 1, tzinfo=UTC)  # a 30-day cycle
SUB = Subscription(PlanName.FREE, START)
ONE_OP = 3_400  # credits of one sponsored op


def test_one_op_a_minute_into_a_fresh_cycle_forecasts_no_absurd_overage() -> None:
    at = START + timedelta(minutes=1)
    grant = plan(PlanName.FREE).monthly_credits or 0
    window_start = forecast_window(START, at)  # the project was created with the cycle
    outlook = forecast(
        SUB, ONE_OP, grant - ONE_OP, at, window_start=window_start, window_used=ONE_OP
    )
    # One minute's use counts as one day's: at most a month of one op a day.
    assert outlook.projected <= ONE_OP * 31
    assert outlook.projected_overage == 0
    assert outlook.basis.seconds == 86_400 and outlook.basis.days == 1.0
    assert (outlook.basis.start, outlook.basis.end) == (START, at)
    assert outlook.basis.credits_per_day == ONE_OP
    assert outlook.basis.method == "daily_average"


def test_the_window_is_the_last_week_or_the_history_there_is() -> None:
    at = START + timedelta(days=20)
    assert forecast_window(START - timedelta(days=90), at) == at - timedelta(days=7)
    assert forecast_window(START + timedelta(days=17), at) == START + timedelta(days=17)
    assert forecast_window(at + timedelta(days=1), at) == at  # a clock behind: no window


def test_a_quiet_last_week_forecasts_little_more_than_the_use_so_far() -> None:
    at = START + timedelta(days=20)
    window_start = at - timedelta(days=7)
    busy_start = forecast(SUB, 5_000_000, 0, at, window_start=window_start, window_used=0)
    assert busy_start.projected == 5_000_000
    assert busy_start.projected_overage == 0


def test_a_steady_pace_projects_to_the_cycles_end() -> None:
    at = START + timedelta(days=23)  # 7 days left
    outlook = forecast(
        SUB, 2_300_000, 200_000, at, window_start=at - timedelta(days=7), window_used=700_000
    )
    assert outlook.basis.credits_per_day == 100_000
    assert outlook.projected == 3_000_000
    assert outlook.projected_overage == 500_000


def test_an_ended_cycle_forecasts_what_was_used() -> None:
    at = START + timedelta(days=40)
    outlook = forecast(SUB, 1_000, 0, at, window_start=at - timedelta(days=7), window_used=900)
    assert (outlook.projected, outlook.projected_overage) == (1_000, 0)
