"""Usage: live balance and consumption rate, breakdowns, trends with a forecast, alerts,
exports.
"""

from __future__ import annotations

from fastapi import APIRouter


def routes() -> APIRouter:
    return APIRouter()
