"""Support requests: their topics, what each plan's support level promises, and the request
for an additional network (requirements §1.2: the chain's name, its mainnet and testnet
chain ids, the use case). Pure rules, no storage.

A support level acts: each has a response target (`ResponseTargets`), the operator's queue
puts SLA requests first, then priority, then community, oldest first within a level
(`in_queue_order`), and an open request past its target is overdue (`ResponseTargets.overdue`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Protocol, TypeVar

from entryway.domain.plans import PlanName, SupportLevel
from entryway.domain.plans import plan as plan_of

MAX_MESSAGE = 5000
MAX_ANSWER = 5000
MAX_CHAIN_NAME = 100
MAX_USE_CASE = 2000
MAX_CHAIN_ID = 2**53  # what JSON and the API's chain id parameters accept


class SupportError(ValueError):
    """A request or an answer the rules refuse; the message is for the person who sent it."""


class SupportTopic(StrEnum):
    TECHNICAL = "technical"
    BILLING = "billing"
    ACCOUNT = "account"
    OTHER = "other"

    @property
    def label(self) -> str:
        return TOPIC_LABELS[self]


TOPIC_LABELS = {
    SupportTopic.TECHNICAL: "Technical support (including an additional network)",
    SupportTopic.BILLING: "Plans, credits and billing",
    SupportTopic.ACCOUNT: "Account and access",
    SupportTopic.OTHER: "Something else",
}


class RequestStatus(StrEnum):
    OPEN = "open"
    ANSWERED = "answered"


SUPPORT_PROMISES = {
    SupportLevel.COMMUNITY: "community support",
    SupportLevel.PRIORITY: "priority support",
    SupportLevel.SLA: "an SLA and a dedicated account manager",
}


def support_promise(plan: PlanName) -> str:
    """What the plan's support level promises, e.g. "FREE: community support"."""
    return f"{plan.value}: {SUPPORT_PROMISES[plan_of(plan).support]}"


# The queue's order: the lower the rank, the sooner the operator reads the request.
LEVEL_RANK = {SupportLevel.SLA: 0, SupportLevel.PRIORITY: 1, SupportLevel.COMMUNITY: 2}

LEVEL_LABELS = {
    SupportLevel.COMMUNITY: "Community",
    SupportLevel.PRIORITY: "Priority",
    SupportLevel.SLA: "SLA",
}


def level_for(plans: Iterable[PlanName]) -> SupportLevel:
    """The support a request is owed: its project's plan's level, or for a request about no
    particular project the best level among the author's projects (community without one)."""
    levels = [plan_of(p).support for p in plans]
    return min(levels, key=LEVEL_RANK.__getitem__, default=SupportLevel.COMMUNITY)


@dataclass(frozen=True, slots=True)
class ResponseTargets:
    """How soon the operator answers, by support level, in whole hours (settings
    `support.*_response_hours`). Hours, not business days: the target is a clock the user
    and the operator read alike, whatever the operator's calendar."""

    community_hours: int = 72
    priority_hours: int = 24
    sla_hours: int = 4

    def hours(self, level: SupportLevel) -> int:
        return {
            SupportLevel.COMMUNITY: self.community_hours,
            SupportLevel.PRIORITY: self.priority_hours,
            SupportLevel.SLA: self.sla_hours,
        }[level]

    def due_at(self, level: SupportLevel, filed_at: datetime) -> datetime:
        """When the answer is due for a request filed at `filed_at`."""
        return filed_at + timedelta(hours=self.hours(level))

    def overdue(
        self, level: SupportLevel, filed_at: datetime, answered_at: datetime | None, now: datetime
    ) -> bool:
        """Still unanswered past its target (a late answer ends the overdue state)."""
        return answered_at is None and now > self.due_at(level, filed_at)

    def filed_before(self, now: datetime) -> dict[SupportLevel, datetime]:
        """For each level, the time an open request must have been filed before to be
        overdue at `now` (the same rule as `overdue`, for a query)."""
        return {level: now - timedelta(hours=self.hours(level)) for level in SupportLevel}

    def describe(self, level: SupportLevel) -> str:
        """The target as the user reads it, e.g. "a first answer within 24 hours"."""
        hours = self.hours(level)
        return f"a first answer within {hours} hour{'s' if hours != 1 else ''}"


class Queued(Protocol):
    """What the queue's order reads of a request."""

    @property
    def level(self) -> SupportLevel: ...

    @property
    def created_at(self) -> datetime: ...


Q = TypeVar("Q", bound=Queued)


def in_queue_order(requests: Iterable[Q]) -> list[Q]:
    """SLA first, then priority, then community; the oldest first within a level."""
    return sorted(requests, key=lambda r: (LEVEL_RANK[r.level], r.created_at))


@dataclass(frozen=True, slots=True)
class NetworkRequest:
    """A further network asked for (requirements §1.2)."""

    chain_name: str
    mainnet_chain_id: int
    testnet_chain_id: int
    use_case: str

    def as_details(self) -> dict[str, str | int]:
        return {
            "chain_name": self.chain_name,
            "mainnet_chain_id": self.mainnet_chain_id,
            "testnet_chain_id": self.testnet_chain_id,
            "use_case": self.use_case,
        }


def chain_id_of(text: str, what: str) -> int:
    """A chain id as typed: a positive decimal integer within what the API takes."""
    value = text.strip()
    if not (value.isascii() and value.isdigit()) or int(value) < 1 or int(value) > MAX_CHAIN_ID:
        raise SupportError(f"Give the {what} as a positive whole number, e.g. 137.")
    return int(value)


def network_request(
    chain_name: str, mainnet_chain_id: str, testnet_chain_id: str, use_case: str
) -> NetworkRequest:
    name = chain_name.strip()
    if not name or len(name) > MAX_CHAIN_NAME:
        raise SupportError(f"Name the chain (1 to {MAX_CHAIN_NAME} characters).")
    mainnet = chain_id_of(mainnet_chain_id, "mainnet chain id")
    testnet = chain_id_of(testnet_chain_id, "testnet chain id")
    if mainnet == testnet:
        raise SupportError("The mainnet and the testnet have different chain ids.")
    purpose = use_case.strip()
    if not purpose or len(purpose) > MAX_USE_CASE:
        raise SupportError(f"Describe the use case (1 to {MAX_USE_CASE} characters).")
    return NetworkRequest(name, mainnet, testnet, purpose)


def checked_message(message: str) -> str:
    text = message.strip()
    if not text or len(text) > MAX_MESSAGE:
        raise SupportError(f"Write a message of 1 to {MAX_MESSAGE} characters.")
    return text


def checked_answer(answer: str) -> str:
    text = answer.strip()
    if not text or len(text) > MAX_ANSWER:
        raise SupportError(f"Write an answer of 1 to {MAX_ANSWER} characters.")
    return text
