"""The operator's pages: every project and its usage, support requests, approvals, plans and
prices, maintenance and network status.
"""

from __future__ import annotations

from fastapi import APIRouter


def routes() -> APIRouter:
    return APIRouter()
