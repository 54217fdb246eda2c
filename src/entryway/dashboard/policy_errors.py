"""A sponsorship rules error in the form's terms: which field it is about, in plain words.
The rules document names its paths (`spendCap.credits`); the form shows the error beside the
field that holds them. Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Rule paths to the form field holding them, the longest path tried first.
_FIELDS = {
    "spendCap.credits": "spend_credits",
    "spendCap.period": "spend_period",
    "spendCap": "spend_credits",
    "operationCap.operations": "operation_count",
    "operationCap.period": "operation_period",
    "operationCap": "operation_count",
    "perSender.credits": "sender_credits",
    "perSender.operations": "sender_operations",
    "perSender.period": "sender_period",
    "perSender": "sender_credits",
    "allowedTargets": "allowed_targets",
    "allowedSelectors": "allowed_selectors",
    "startsAt": "starts_at",
    "endsAt": "ends_at",
    "sponsor.name": "sponsor_name",
    "sponsor": "sponsor_name",
}
_WHOLE = re.compile(r"must be a non-negative integer, at most (\d+)")
_MOMENT = re.compile(r"must be an ISO 8601 date-time")


@dataclass(frozen=True, slots=True)
class FieldError:
    field: str | None  # None: about the policy as a whole
    text: str


def field_error(message: str) -> FieldError:
    """`message`, a rules error such as "spendCap.credits must be a non-negative integer, at
    most 4611686018427387904", as the field it concerns and a sentence a person reads."""
    if message.startswith("endsAt must be after startsAt"):
        return FieldError("ends_at", "The end must come after the start.")
    for path in sorted(_FIELDS, key=len, reverse=True):
        if message.startswith(path) and message[len(path) : len(path) + 1] in (" ", ":"):
            return FieldError(_FIELDS[path], _plain(message[len(path) :].lstrip(": ")))
    return FieldError(None, message[:1].upper() + message[1:])


def _plain(rest: str) -> str:
    whole = _WHOLE.match(rest)
    if whole:
        return f"Enter a whole number from 0 to {int(whole.group(1)):,}, or leave it empty."
    if _MOMENT.match(rest):
        return "Enter a date and time in UTC as YYYY-MM-DD HH:MM:SS, or leave it empty."
    return rest[:1].upper() + rest[1:] + ("" if rest.endswith(".") else ".")
