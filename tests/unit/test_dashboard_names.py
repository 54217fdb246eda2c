"""The names and sentences the dashboard shows for technical keys: usage breakdown keys,
support levels, networks, and the sponsorship rules' errors beside their form field."""

from __future__ import annotations

import pytest

from entryway.dashboard.names import usage_label, words
from entryway.dashboard.policy_errors import FieldError, field_error
from entryway.domain.credits import MAX_CREDITS
from entryway.domain.networks import NETWORKS
from entryway.domain.sponsorship import PolicyRulesError, SponsorshipRules


@pytest.mark.parametrize(
    ("key", "shown"),
    [
        ("sponsored_user_operation", "Sponsored user operation"),
        ("notarization", "Notarization"),
        ("rpc:eth_sendUserOperation", "JSON-RPC eth_sendUserOperation"),
        ("rpc:unknown", "JSON-RPC, methods not served"),
        ("wallets:eth_sendUserOperation", "Wallets API eth_sendUserOperation"),
        ("notarizations.hash", "Notarizations · hash"),
        ("pm_getPaymasterStubData", "pm_getPaymasterStubData"),  # a method, as it is called
    ],
)
def test_usage_keys_read_as_words(key: str, shown: str) -> None:
    assert usage_label(key) == shown


def test_support_levels_spell_sla_in_capitals() -> None:
    assert words("sla_and_dedicated_account_manager") == "SLA and dedicated account manager"
    assert words("priority") == "Priority"


def test_networks_have_names_not_slugs() -> None:
    assert NETWORKS[80002].title == "Polygon Amoy"
    assert NETWORKS[8453].title == "Base Mainnet"
    assert all("-" not in n.title for n in NETWORKS.values())


def refusal(rules: dict[str, object]) -> str:
    with pytest.raises(PolicyRulesError) as refused:
        SponsorshipRules.from_json(rules)
    return str(refused.value)


def test_a_bad_cap_is_put_beside_its_field_in_plain_words() -> None:
    problem = field_error(refusal({"spendCap": {"credits": "lots", "period": "month"}}))
    assert problem == FieldError(
        "spend_credits", f"Enter a whole number from 0 to {MAX_CREDITS:,}, or leave it empty."
    )
    assert field_error(refusal({"perSender": {"operations": -1, "period": "day"}})).field == (
        "sender_operations"
    )


def test_dates_selectors_and_whole_policy_errors_find_their_place() -> None:
    starts = field_error(refusal({"startsAt": "11/26/2026"}))
    assert starts.field == "starts_at" and "YYYY-MM-DD HH:MM:SS" in starts.text
    order = field_error(refusal({"startsAt": "2030-01-02", "endsAt": "2030-01-01"}))
    assert order == FieldError("ends_at", "The end must come after the start.")
    selectors = field_error(refusal({"allowedSelectors": ["0x12"]}))
    assert selectors.field == "allowed_selectors" and "allowedSelectors" not in selectors.text
    unknown = field_error(refusal({"colour": "blue"}))
    assert unknown.field is None and unknown.text.startswith("Unknown rule(s)")
