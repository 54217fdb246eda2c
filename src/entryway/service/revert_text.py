"""Revert data in words, with the custom errors of Entryway's own contracts known: what the
op page, the JSON-RPC error's explanation and the request log say of an account's revert."""

from __future__ import annotations

from entryway import contracts
from entryway.domain.revert_reasons import RevertReason, explain_revert

ERRORS = tuple(
    contracts.load(name).abi
    for name in ("SmartAccount", "SimpleAccount", "VerifyingPaymaster", "AccountFactory")
)


def revert_reason(data: bytes) -> RevertReason:
    return explain_revert(data, ERRORS)


def revert_text(data: bytes) -> str | None:
    """What a person reads of `data`; None when nothing is known of it."""
    reason = revert_reason(data)
    return None if reason.kind in ("empty", "unknown") else reason.message
