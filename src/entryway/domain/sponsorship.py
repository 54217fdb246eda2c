"""Sponsorship policies: which UserOperations a project's paymaster pays for. Pure.

A policy's rules are a JSON document (stored as text, edited through the API), parsed here
into a typed model and evaluated against one op: its sender, the calls its account will make
(decoded from the call data, or None when they cannot be read), its estimated cost in
credits, the time, and what the policy has already paid for. The first rule that refuses
names itself in the `Decision`, so the refusal can say which rule it was.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from entryway.domain.bounds import MAX_CREDITS, BoundError, check_text, utc_moment
from entryway.domain.evm import checksum
from entryway.errors import EntrywayError

_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")
_SELECTOR = re.compile(r"^0x[0-9a-fA-F]{8}$")
MAX_ALLOWLIST = 1_000  # addresses, or selectors, in one allowlist
MAX_SPONSOR_NAME = 200
MAX_SPONSOR_ICON = 100_000  # characters of the data URI


class PolicyRulesError(EntrywayError):
    """A rules document that does not describe a policy."""


class Period(StrEnum):
    """When a cap's count starts again (calendar periods in UTC; weeks start on Monday)."""

    DAY = "day"
    WEEK = "week"
    MONTH = "month"
    NEVER = "never"


def period_start(period: Period, at: datetime) -> datetime | None:
    """The start of the period `at` falls in; None for a count that never resets."""
    day = at.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if period is Period.DAY:
        return day
    if period is Period.WEEK:
        return day - timedelta(days=day.weekday())
    if period is Period.MONTH:
        return day.replace(day=1)
    return None


class Rule(StrEnum):
    """Stable names of the rules, as refusals report them (`data.rule`)."""

    POLICY_UNKNOWN = "policy_unknown"
    POLICY_INACTIVE = "policy_inactive"
    POLICY_REQUIRED = "policy_required"
    NO_ACTIVE_POLICY = "no_active_policy"
    WINDOW_NOT_STARTED = "window_not_started"
    WINDOW_ENDED = "window_ended"
    UNREADABLE_CALLS = "unreadable_calls"
    ALLOWED_TARGETS = "allowed_targets"
    ALLOWED_SELECTORS = "allowed_selectors"
    SPEND_CAP = "spend_cap"
    OPERATION_CAP = "operation_cap"
    SENDER_SPEND_CAP = "sender_spend_cap"
    SENDER_OPERATION_CAP = "sender_operation_cap"
    # Not a policy's rule: a hold past the spending budget the project's owner chose.
    BUDGET_EXCEEDED = "budget_exceeded"


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    rule: Rule | None
    message: str

    @classmethod
    def allow(cls, message: str = "sponsored") -> Decision:
        return cls(True, None, message)

    @classmethod
    def refuse(cls, rule: Rule, message: str) -> Decision:
        return cls(False, rule, message)


@dataclass(frozen=True, slots=True)
class Cap:
    limit: int
    period: Period = Period.NEVER


@dataclass(frozen=True, slots=True)
class SponsorInfo:
    """Who the wallet may show as paying (ERC-7677 `sponsor`); `icon` is a data URI."""

    name: str
    icon: str | None = None


@dataclass(frozen=True, slots=True)
class SponsorshipRules:
    spend_cap: Cap | None = None  # credits, all senders together
    operation_cap: Cap | None = None  # ops, all senders together
    sender_spend_cap: Cap | None = None  # credits, per sender  } one period in the
    sender_operation_cap: Cap | None = None  # ops, per sender    } JSON form (perSender)
    allowed_targets: frozenset[str] | None = None  # checksummed addresses
    allowed_selectors: frozenset[bytes] | None = None  # 4-byte selectors
    starts_at: datetime | None = None
    ends_at: datetime | None = None
    sponsor: SponsorInfo | None = None

    @property
    def has_caps(self) -> bool:
        """Whether a decision depends on what was sponsored before (and so on ordering)."""
        caps = (self.spend_cap, self.operation_cap, self.sender_spend_cap)
        return any(c is not None for c in (*caps, self.sender_operation_cap))

    @property
    def has_allowlist(self) -> bool:
        return self.allowed_targets is not None or self.allowed_selectors is not None

    @classmethod
    def from_json(cls, doc: Any) -> SponsorshipRules:
        return _parse_rules(doc)

    def to_json(self) -> dict[str, Any]:
        return _rules_json(self)


@dataclass(frozen=True, slots=True)
class SponsorshipPolicy:
    policy_id: str
    project_id: str
    name: str
    rules: SponsorshipRules
    active: bool
    created_at: datetime
    updated_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Call:
    """One call an account's execution makes."""

    target: str
    value: int
    data: bytes

    @property
    def selector(self) -> bytes | None:
        return self.data[:4] if len(self.data) >= 4 else None


@dataclass(frozen=True, slots=True)
class PolicyUsage:
    """What the policy has paid for in each cap's current period (released holds excluded)."""

    spent_credits: int = 0
    operations: int = 0
    sender_spent_credits: int = 0
    sender_operations: int = 0


@dataclass(frozen=True, slots=True)
class SponsorshipRequest:
    sender: str
    calls: tuple[Call, ...] | None  # None: the call data could not be decoded
    credits: int  # this op's estimated cost
    at: datetime


@dataclass(frozen=True, slots=True)
class PolicyChoice:
    policy: SponsorshipPolicy | None  # None with an allowing decision: no policy applies
    decision: Decision = field(default_factory=Decision.allow)


def choose_policy(policies: Sequence[SponsorshipPolicy], policy_id: str | None) -> PolicyChoice:
    """The policy a request is held to: the one `policy_id` names, else the project's only
    active one. A project without any policy sponsors without limits; one whose policies are
    all inactive sponsors nothing; with several active, the request must name one."""

    def refused(rule: Rule, message: str) -> PolicyChoice:
        return PolicyChoice(None, Decision.refuse(rule, message))

    if policy_id is not None:
        named = next((p for p in policies if p.policy_id == policy_id), None)
        if named is None:
            return refused(Rule.POLICY_UNKNOWN, f"no policy {policy_id} in this project")
        if not named.active:
            return refused(Rule.POLICY_INACTIVE, f"policy {policy_id} is inactive")
        return PolicyChoice(named)
    active = [p for p in policies if p.active]
    if policies and not active:
        return refused(Rule.NO_ACTIVE_POLICY, "the project's sponsorship policies are all inactive")
    if len(active) > 1:
        ids = ", ".join(sorted(p.policy_id for p in active))
        return refused(
            Rule.POLICY_REQUIRED,
            f"the project has several active policies ({ids}): name one in context.policyId",
        )
    return PolicyChoice(active[0] if active else None)


def evaluate(rules: SponsorshipRules, request: SponsorshipRequest, usage: PolicyUsage) -> Decision:
    """Window first, then what the op calls, then the caps; the first refusal wins."""
    for check in (_window, _calls, _caps):
        decision = check(rules, request, usage)
        if not decision.allowed:
            return decision
    return Decision.allow()


def _window(rules: SponsorshipRules, request: SponsorshipRequest, _: PolicyUsage) -> Decision:
    if rules.starts_at is not None and request.at < rules.starts_at:
        return Decision.refuse(
            Rule.WINDOW_NOT_STARTED, f"the policy starts at {rules.starts_at.isoformat()}"
        )
    if rules.ends_at is not None and request.at >= rules.ends_at:
        return Decision.refuse(
            Rule.WINDOW_ENDED, f"the policy ended at {rules.ends_at.isoformat()}"
        )
    return Decision.allow()


def _calls(rules: SponsorshipRules, request: SponsorshipRequest, _: PolicyUsage) -> Decision:
    if not rules.has_allowlist:
        return Decision.allow()
    if request.calls is None:
        return Decision.refuse(
            Rule.UNREADABLE_CALLS,
            "the policy has an allowlist, and the op's call data is not a call the paymaster "
            "can read (execute / executeBatch of ERC-4337 accounts, ERC-7579 execute)",
        )
    for index, call in enumerate(request.calls):
        if rules.allowed_targets is not None and checksum(call.target) not in rules.allowed_targets:
            return Decision.refuse(
                Rule.ALLOWED_TARGETS, f"call {index} targets {call.target}, not in allowedTargets"
            )
        if rules.allowed_selectors is not None:
            selector = call.selector
            if selector is None:
                return Decision.refuse(
                    Rule.ALLOWED_SELECTORS,
                    f"call {index} calls no function, and allowedSelectors is set",
                )
            if selector not in rules.allowed_selectors:
                return Decision.refuse(
                    Rule.ALLOWED_SELECTORS,
                    f"call {index} calls selector 0x{selector.hex()}, not in allowedSelectors",
                )
    return Decision.allow()


def _caps(rules: SponsorshipRules, request: SponsorshipRequest, usage: PolicyUsage) -> Decision:
    sender = f"for sender {request.sender}"
    checks = (
        (rules.spend_cap, usage.spent_credits, request.credits, Rule.SPEND_CAP, "credits"),
        (rules.operation_cap, usage.operations, 1, Rule.OPERATION_CAP, "operations"),
        (rules.sender_spend_cap, usage.sender_spent_credits, request.credits,
         Rule.SENDER_SPEND_CAP, f"credits {sender}"),
        (rules.sender_operation_cap, usage.sender_operations, 1,
         Rule.SENDER_OPERATION_CAP, f"operations {sender}"),
    )  # fmt: skip
    for cap, used, more, rule, what in checks:
        if cap is not None and used + more > cap.limit:
            return Decision.refuse(
                rule,
                f"{rule.value}: {used} {what} used {_period_phrase(cap.period)} and this op needs "
                f"{more} more; the cap is {cap.limit}",
            )
    return Decision.allow()


def _period_phrase(period: Period) -> str:
    return "in all" if period is Period.NEVER else f"this {period.value}"


# ---------------------------------------------------------------------- JSON form

_KEYS = {
    "spendCap",
    "operationCap",
    "perSender",
    "allowedTargets",
    "allowedSelectors",
    "startsAt",
    "endsAt",
    "sponsor",
}


def _parse_rules(doc: Any) -> SponsorshipRules:
    if not isinstance(doc, Mapping):
        raise PolicyRulesError("rules must be a JSON object")
    unknown = sorted(set(doc) - _KEYS)
    if unknown:
        raise PolicyRulesError(f"unknown rule(s): {', '.join(unknown)}")
    sender_credits = sender_ops = None
    per_sender = doc.get("perSender")
    if per_sender is not None:
        _only(per_sender, "perSender", {"credits", "operations", "period"})
        period = _period(per_sender.get("period", "never"), "perSender.period")
        if per_sender.get("credits") is not None:
            sender_credits = Cap(_count(per_sender["credits"], "perSender.credits"), period)
        if per_sender.get("operations") is not None:
            sender_ops = Cap(_count(per_sender["operations"], "perSender.operations"), period)
        if sender_credits is None and sender_ops is None:
            raise PolicyRulesError("perSender needs credits, operations or both")
    rules = SponsorshipRules(
        spend_cap=_cap(doc.get("spendCap"), "spendCap", "credits"),
        operation_cap=_cap(doc.get("operationCap"), "operationCap", "operations"),
        sender_spend_cap=sender_credits,
        sender_operation_cap=sender_ops,
        allowed_targets=_targets(doc.get("allowedTargets")),
        allowed_selectors=_selectors(doc.get("allowedSelectors")),
        starts_at=_moment(doc.get("startsAt"), "startsAt"),
        ends_at=_moment(doc.get("endsAt"), "endsAt"),
        sponsor=_sponsor(doc.get("sponsor")),
    )
    if rules.starts_at and rules.ends_at and rules.ends_at <= rules.starts_at:
        raise PolicyRulesError("endsAt must be after startsAt")
    return rules


def _only(value: Any, where: str, keys: set[str]) -> None:
    if not isinstance(value, Mapping):
        raise PolicyRulesError(f"{where} must be an object")
    unknown = sorted(set(value) - keys)
    if unknown:
        raise PolicyRulesError(f"{where}: unknown field(s) {', '.join(unknown)}")


def _count(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_CREDITS:
        raise PolicyRulesError(f"{where} must be a non-negative integer, at most {MAX_CREDITS}")
    return value


def _period(value: Any, where: str) -> Period:
    try:
        return Period(value)
    except ValueError:
        choices = ", ".join(p.value for p in Period)
        raise PolicyRulesError(f"{where} must be one of {choices}") from None


def _cap(value: Any, where: str, unit: str) -> Cap | None:
    if value is None:
        return None
    _only(value, where, {unit, "period"})
    if unit not in value:
        raise PolicyRulesError(f"{where} needs {unit}")
    return Cap(_count(value[unit], f"{where}.{unit}"), _period(value.get("period", "never"), where))


def _targets(value: Any) -> frozenset[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(v, str) and _ADDRESS.match(v) for v in value
    ):
        raise PolicyRulesError("allowedTargets must be a list of 20-byte hex addresses")
    if len(value) > MAX_ALLOWLIST:
        raise PolicyRulesError(f"allowedTargets holds at most {MAX_ALLOWLIST} addresses")
    return frozenset(checksum(v) for v in value)


def _selectors(value: Any) -> frozenset[bytes] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(v, str) and _SELECTOR.match(v) for v in value
    ):
        raise PolicyRulesError(
            "allowedSelectors must be a list of 4-byte hex selectors (0x1234abcd)"
        )
    if len(value) > MAX_ALLOWLIST:
        raise PolicyRulesError(f"allowedSelectors holds at most {MAX_ALLOWLIST} selectors")
    return frozenset(bytes.fromhex(v[2:]) for v in value)


def _moment(value: Any, where: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise PolicyRulesError(f"{where} must be an ISO 8601 date-time")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise PolicyRulesError(f"{where} must be an ISO 8601 date-time, not {value!r}") from None
    try:
        return utc_moment(moment, where)
    except BoundError as exc:
        raise PolicyRulesError(str(exc)) from None


def _sponsor(value: Any) -> SponsorInfo | None:
    if value is None:
        return None
    _only(value, "sponsor", {"name", "icon"})
    name, icon = value.get("name"), value.get("icon")
    if not isinstance(name, str) or not name.strip():
        raise PolicyRulesError("sponsor.name must be a non-empty string")
    if icon is not None and (not isinstance(icon, str) or not icon.startswith("data:")):
        raise PolicyRulesError("sponsor.icon must be a data URI (RFC 2397), as ERC-7677 requires")
    try:
        check_text(name, "sponsor.name", max_length=MAX_SPONSOR_NAME)
        if icon is not None:
            check_text(icon, "sponsor.icon", max_length=MAX_SPONSOR_ICON)
    except BoundError as exc:
        raise PolicyRulesError(str(exc)) from None
    return SponsorInfo(name, icon)


def _rules_json(rules: SponsorshipRules) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if rules.spend_cap is not None:
        out["spendCap"] = {"credits": rules.spend_cap.limit, "period": rules.spend_cap.period.value}
    if rules.operation_cap is not None:
        out["operationCap"] = {
            "operations": rules.operation_cap.limit,
            "period": rules.operation_cap.period.value,
        }
    sender = rules.sender_spend_cap or rules.sender_operation_cap
    if sender is not None:
        out["perSender"] = {"period": sender.period.value}
        if rules.sender_spend_cap is not None:
            out["perSender"]["credits"] = rules.sender_spend_cap.limit
        if rules.sender_operation_cap is not None:
            out["perSender"]["operations"] = rules.sender_operation_cap.limit
    if rules.allowed_targets is not None:
        out["allowedTargets"] = sorted(rules.allowed_targets)
    if rules.allowed_selectors is not None:
        out["allowedSelectors"] = sorted("0x" + s.hex() for s in rules.allowed_selectors)
    if rules.starts_at is not None:
        out["startsAt"] = rules.starts_at.isoformat()
    if rules.ends_at is not None:
        out["endsAt"] = rules.ends_at.isoformat()
    if rules.sponsor is not None:
        out["sponsor"] = {"name": rules.sponsor.name}
        if rules.sponsor.icon is not None:
            out["sponsor"]["icon"] = rules.sponsor.icon
    return out
