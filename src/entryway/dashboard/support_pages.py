"""Support requests, with the plan's support level and the additional-network form."""

from __future__ import annotations

from fastapi import APIRouter


def routes() -> APIRouter:
    return APIRouter()
