"""API keys: create with a chain set (secret shown once), list by prefix with last use, rotate,
revoke.
"""

from __future__ import annotations

from fastapi import APIRouter


def routes() -> APIRouter:
    return APIRouter()
