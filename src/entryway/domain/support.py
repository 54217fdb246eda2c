"""Support requests: their topics, what each plan's support level promises, and the request
for an additional network (requirements §1.2: the chain's name, its mainnet and testnet
chain ids, the use case). Pure rules, no storage."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

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
