"""Operations: UserOperations, notarizations, tasks, webhooks with their deliveries,
sponsorship policies, the paymaster deposit.
"""

from __future__ import annotations

from fastapi import APIRouter


def routes() -> APIRouter:
    return APIRouter()
