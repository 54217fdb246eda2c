"""Support requests' rules: each plan's support level, and the additional-network request
(requirements §1.2: chain name, mainnet and testnet chain ids, use case)."""

from __future__ import annotations

import pytest

from entryway.domain.plans import PlanName
from entryway.domain.support import (
    SupportError,
    checked_answer,
    checked_message,
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
