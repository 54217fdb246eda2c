"""Support requests' rules: each plan's support level, and the additional-network request
(requirements §1.2: chain name, mainnet and testnet chain ids, use case); the queue's order by
level, the response targets and overdue requests, on a fixed clock."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from entryway.domain.plans import PlanName, SupportLevel
from entryway.domain.support import (
    ResponseTargets,
    SupportError,
    checked_answer,
    checked_message,
    in_queue_order,
    level_for,
    network_request,
    support_promise,
)


def test_each_plan_names_its_support_level() -> None:
    assert support_promise(PlanName.FREE) == "FREE: community support"
    assert support_promise(PlanName.STARTER) == "STARTER: community support"
    assert support_promise(PlanName.PRO) == "PRO: priority support"
    assert support_promise(PlanName.SCALE) == "SCALE: priority support"
    assert support_promise(PlanName.ENTERPRISE) == (
        "ENTERPRISE: an SLA and a dedicated account manager"
    )


def test_a_network_request_keeps_its_four_fields_with_integer_chain_ids() -> None:
    asked = network_request(" Gnosis ", "100", " 10200 ", "Payroll on a stable-fee chain")
    assert asked.as_details() == {
        "chain_name": "Gnosis",
        "mainnet_chain_id": 100,
        "testnet_chain_id": 10200,
        "use_case": "Payroll on a stable-fee chain",
    }


@pytest.mark.parametrize(
    "mainnet, testnet",
    [("0", "10200"), ("-1", "10200"), ("1.5", "10200"), ("0x64", "10200"), ("100", ""),
     ("100", "9" * 17), ("\u0661\u0660\u0660", "10200"), ("100", "100")],
)  # fmt: skip
def test_chain_ids_must_be_distinct_positive_whole_numbers(mainnet: str, testnet: str) -> None:
    with pytest.raises(SupportError):
        network_request("Gnosis", mainnet, testnet, "Payroll")


def test_a_network_request_needs_a_name_and_a_use_case() -> None:
    with pytest.raises(SupportError, match="Name the chain"):
        network_request("  ", "100", "10200", "Payroll")
    with pytest.raises(SupportError, match="use case"):
        network_request("Gnosis", "100", "10200", " ")


def test_messages_and_answers_are_neither_empty_nor_endless() -> None:
    assert checked_message("  help  ") == "help"
    for check in (checked_message, checked_answer):
        with pytest.raises(SupportError):
            check(" \n ")
        with pytest.raises(SupportError):
            check("x" * 5001)


# Support levels that act: the queue's order, the response targets, overdue requests.

FILED = datetime(2026, 11, 20, 9, tzinfo=UTC)


@dataclass(frozen=True)
class Filed:
    name: str
    level: SupportLevel
    created_at: datetime


def test_the_queue_puts_sla_first_then_priority_then_community_oldest_first() -> None:
    hour = timedelta(hours=1)
    filed = [
        Filed("community old", SupportLevel.COMMUNITY, FILED),
        Filed("priority new", SupportLevel.PRIORITY, FILED + 3 * hour),
        Filed("sla new", SupportLevel.SLA, FILED + 4 * hour),
        Filed("community new", SupportLevel.COMMUNITY, FILED + 5 * hour),
        Filed("priority old", SupportLevel.PRIORITY, FILED + hour),
        Filed("sla old", SupportLevel.SLA, FILED + 2 * hour),
    ]
    assert [f.name for f in in_queue_order(filed)] == [
        "sla old",
        "sla new",
        "priority old",
        "priority new",
        "community old",
        "community new",
    ]


def test_each_plan_is_owed_its_level_and_no_project_the_best_of_the_authors() -> None:
    assert level_for([PlanName.FREE]) is SupportLevel.COMMUNITY
    assert level_for([PlanName.STARTER]) is SupportLevel.COMMUNITY
    assert level_for([PlanName.PRO]) is SupportLevel.PRIORITY
    assert level_for([PlanName.SCALE]) is SupportLevel.PRIORITY
    assert level_for([PlanName.ENTERPRISE]) is SupportLevel.SLA
    assert level_for([PlanName.FREE, PlanName.ENTERPRISE, PlanName.PRO]) is SupportLevel.SLA
    assert level_for([]) is SupportLevel.COMMUNITY  # a user without a project


def test_default_targets_are_72_24_and_4_hours() -> None:
    targets = ResponseTargets()
    assert targets.due_at(SupportLevel.COMMUNITY, FILED) == FILED + timedelta(hours=72)
    assert targets.due_at(SupportLevel.PRIORITY, FILED) == FILED + timedelta(hours=24)
    assert targets.due_at(SupportLevel.SLA, FILED) == FILED + timedelta(hours=4)
    assert targets.describe(SupportLevel.SLA) == "a first answer within 4 hours"
    assert ResponseTargets(sla_hours=1).describe(SupportLevel.SLA) == (
        "a first answer within 1 hour"
    )


def test_an_open_request_is_overdue_only_past_its_own_levels_target() -> None:
    targets = ResponseTargets(community_hours=48, priority_hours=12, sla_hours=2)
    at_sla_due = FILED + timedelta(hours=2)
    assert not targets.overdue(SupportLevel.SLA, FILED, None, at_sla_due)  # due, not past
    just_past = at_sla_due + timedelta(seconds=1)
    assert targets.overdue(SupportLevel.SLA, FILED, None, just_past)
    assert not targets.overdue(SupportLevel.PRIORITY, FILED, None, just_past)
    assert targets.overdue(SupportLevel.PRIORITY, FILED, None, FILED + timedelta(hours=13))
    assert not targets.overdue(SupportLevel.COMMUNITY, FILED, None, FILED + timedelta(hours=47))
    assert targets.overdue(SupportLevel.COMMUNITY, FILED, None, FILED + timedelta(hours=49))


def test_an_answered_request_is_never_overdue_even_answered_late() -> None:
    targets = ResponseTargets()
    late_answer = FILED + timedelta(hours=30)
    later = FILED + timedelta(days=30)
    assert not targets.overdue(SupportLevel.SLA, FILED, late_answer, later)


def test_the_cutoffs_for_a_query_agree_with_the_overdue_rule() -> None:
    targets = ResponseTargets(community_hours=50, priority_hours=10, sla_hours=3)
    now = FILED + timedelta(days=5)
    cutoffs = targets.filed_before(now)
    for level in SupportLevel:
        cutoff = cutoffs[level]
        assert cutoff == now - timedelta(hours=targets.hours(level))
        assert targets.overdue(level, cutoff - timedelta(seconds=1), None, now)
        assert not targets.overdue(level, cutoff, None, now)  # filed at the cutoff: just due
