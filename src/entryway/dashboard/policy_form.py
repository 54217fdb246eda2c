"""The sponsorship policy form: its fields to the rules document /v1/policies takes, and a
policy back to the fields for editing. Pure. The form only arranges what was typed; every
check is the rules document's own (`SponsorshipRules.from_json`), so a number that is not
one reaches it as text and is refused with the same message as through the API."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

from entryway.domain.sponsorship import Cap, Period, SponsorshipPolicy, SponsorshipRules

PERIODS = [p.value for p in Period]
_SEPARATORS = re.compile(r"[\s,]+")
_UTC_MOMENT = "%Y-%m-%d %H:%M:%S"  # ISO 8601 in UTC, as the form shows and takes it


@dataclass(frozen=True, slots=True)
class PolicyForm:
    name: str = ""
    active: bool = True
    spend_credits: str = ""
    spend_period: str = "month"
    operation_count: str = ""
    operation_period: str = "month"
    sender_credits: str = ""
    sender_operations: str = ""
    sender_period: str = "day"
    allowed_targets: str = ""
    allowed_selectors: str = ""
    starts_at: str = ""
    ends_at: str = ""
    sponsor_name: str = ""

    @classmethod
    def read(cls, text: Callable[[str], str], ticked: Callable[[str], bool]) -> PolicyForm:
        """The form as posted: `text(name)` gives a field, `ticked(name)` a checkbox."""
        values: dict[str, Any] = {f.name: text(f.name) for f in fields(cls) if f.name != "active"}
        return cls(active=ticked("active"), **values)

    @classmethod
    def of(cls, policy: SponsorshipPolicy) -> PolicyForm:
        """A policy's name and rules as the form shows them."""
        rules = policy.rules
        sender = rules.sender_spend_cap or rules.sender_operation_cap
        return cls(
            name=policy.name,
            active=policy.active,
            spend_credits=_limit(rules.spend_cap),
            spend_period=_period(rules.spend_cap, "month"),
            operation_count=_limit(rules.operation_cap),
            operation_period=_period(rules.operation_cap, "month"),
            sender_credits=_limit(rules.sender_spend_cap),
            sender_operations=_limit(rules.sender_operation_cap),
            sender_period=_period(sender, "day"),
            allowed_targets="\n".join(sorted(rules.allowed_targets or ())),
            allowed_selectors="\n".join(
                sorted("0x" + s.hex() for s in rules.allowed_selectors or ())
            ),
            starts_at=_moment(rules.starts_at),
            ends_at=_moment(rules.ends_at),
            sponsor_name=rules.sponsor.name if rules.sponsor else "",
        )

    def rules_document(self, keep_icon: str | None = None) -> dict[str, Any]:
        """The rules document of /v1/policies. `keep_icon`: the sponsor icon the policy had
        (the form does not edit icons), kept while it names a sponsor."""
        doc: dict[str, Any] = {}
        if self.spend_credits:
            doc["spendCap"] = {"credits": _number(self.spend_credits), "period": self.spend_period}
        if self.operation_count:
            doc["operationCap"] = {
                "operations": _number(self.operation_count),
                "period": self.operation_period,
            }
        if self.sender_credits or self.sender_operations:
            per_sender: dict[str, Any] = {"period": self.sender_period}
            if self.sender_credits:
                per_sender["credits"] = _number(self.sender_credits)
            if self.sender_operations:
                per_sender["operations"] = _number(self.sender_operations)
            doc["perSender"] = per_sender
        if self.allowed_targets:
            doc["allowedTargets"] = _items(self.allowed_targets)
        if self.allowed_selectors:
            doc["allowedSelectors"] = _items(self.allowed_selectors)
        if self.starts_at:
            doc["startsAt"] = self.starts_at
        if self.ends_at:
            doc["endsAt"] = self.ends_at
        if self.sponsor_name:
            doc["sponsor"] = {"name": self.sponsor_name}
            if keep_icon is not None:
                doc["sponsor"]["icon"] = keep_icon
        return doc


def sponsor_icon(rules: SponsorshipRules) -> str | None:
    return rules.sponsor.icon if rules.sponsor else None


def _number(text: str) -> int | str:
    """Digits as the integer they spell; anything else as typed, for the rules to refuse."""
    return int(text) if text.isascii() and text.isdigit() else text


def _items(text: str) -> list[str]:
    return [item for item in _SEPARATORS.split(text) if item]


def _limit(cap: Cap | None) -> str:
    return "" if cap is None else str(cap.limit)


def _period(cap: Cap | None, default: str) -> str:
    return default if cap is None else cap.period.value


def _moment(moment: datetime | None) -> str:
    return "" if moment is None else moment.strftime(_UTC_MOMENT)
