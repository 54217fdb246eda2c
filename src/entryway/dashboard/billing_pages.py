"""Plan and billing: the plan and its scheduled change, cycles and invoices, credit lots,
credit packs; the plans page.
"""

from __future__ import annotations

from fastapi import APIRouter


def routes() -> APIRouter:
    return APIRouter()
