"""The pure parts of the operations pages: the policy form to and from the rules document,
deposits in the token's units, and a deposit row for each paymaster of each chain."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

import pytest

from entryway.dashboard.operations_pages import (
    NOTHING,
    deposit_rows,
    native_amount,
    status_tone,
)
from entryway.dashboard.policy_form import PolicyForm
from entryway.deploy.deployer import Deployment
from entryway.domain.entry_points import V07, V08
from entryway.domain.evm import checksum
from entryway.domain.sponsorship import PolicyRulesError, SponsorshipPolicy, SponsorshipRules
from entryway.paymaster.deposit import DepositStatus
from entryway.service.services import ChainRuntime, Services

FULL_RULES = {
    "spendCap": {"credits": 50_000, "period": "month"},
    "operationCap": {"operations": 100, "period": "day"},
    "perSender": {"period": "week", "credits": 900, "operations": 5},
    "allowedTargets": ["0x000000000000000000000000000000000000dEaD"],
    "allowedSelectors": ["0xa9059cbb", "0x095ea7b3"],
    "startsAt": "2030-01-01T00:00:00+00:00",
    "endsAt": "2031-06-30T12:30:15+00:00",
    "sponsor": {"name": "Acme", "icon": "data:image/png;base64,AAAA"},
}


def policy(rules: dict[str, object]) -> SponsorshipPolicy:
    at = datetime(2030, 1, 1, tzinfo=UTC)
    return SponsorshipPolicy("p1", "proj", "Launch", SponsorshipRules.from_json(rules), True, at)


@pytest.mark.parametrize("rules", [{}, FULL_RULES, {"perSender": {"operations": 3}}])
def test_a_policy_shown_on_the_form_and_saved_unchanged_keeps_its_rules(
    rules: dict[str, object],
) -> None:
    original = policy(rules)
    form = PolicyForm.of(original)
    icon = original.rules.sponsor.icon if original.rules.sponsor else None
    assert SponsorshipRules.from_json(form.rules_document(icon)) == original.rules


def test_the_form_leaves_out_what_was_left_empty() -> None:
    form = PolicyForm(name="Open", spend_credits="", sender_period="day")
    assert form.rules_document() == {}


def test_a_number_that_is_not_one_is_refused_by_the_rules_own_check() -> None:
    for typed in ("lots", "-5", "1.5", "\uff11\uff12"):  # the last: full-width digits
        doc = PolicyForm(spend_credits=typed).rules_document()
        with pytest.raises(PolicyRulesError, match=r"spendCap\.credits must be a non-negative"):
            SponsorshipRules.from_json(doc)


def test_allowlists_split_on_lines_commas_and_spaces() -> None:
    form = PolicyForm(allowed_selectors="0xa9059cbb,\n 0x095ea7b3  0x23b872dd\n")
    assert form.rules_document()["allowedSelectors"] == ["0xa9059cbb", "0x095ea7b3", "0x23b872dd"]


def test_the_sponsor_icon_is_kept_only_while_a_sponsor_is_named() -> None:
    assert PolicyForm(sponsor_name="Acme").rules_document("data:x")["sponsor"] == {
        "name": "Acme",
        "icon": "data:x",
    }
    assert "sponsor" not in PolicyForm(sponsor_name="").rules_document("data:x")


def test_the_posted_form_reads_every_field_and_the_checkbox() -> None:
    posted = {"name": "Launch", "spend_credits": "10", "active": "on"}
    form = PolicyForm.read(lambda n: posted.get(n, ""), lambda n: posted.get(n) == "on")
    assert (form.name, form.spend_credits, form.active) == ("Launch", "10", True)
    unticked = PolicyForm.read(lambda n: "", lambda n: False)
    assert unticked.active is False


@pytest.mark.parametrize(
    ("wei", "decimals", "shown"),
    [
        (0, 18, "0"),
        (10_000 * 10**18, 18, "10,000"),
        (10**17, 18, "0.1"),
        (1_234_567_890_123_456_789, 18, "1.234567"),  # cut, never rounded up
        (999_999_999_999_999_999, 18, "0.999999"),
        (1_500_000, 6, "1.5"),
    ],
)
def test_deposits_show_in_the_tokens_units_never_rounded_up(
    wei: int, decimals: int, shown: str
) -> None:
    assert native_amount(wei, decimals) == shown


def test_statuses_are_toned_good_bad_or_still_moving() -> None:
    assert status_tone("included") == "ok"
    assert status_tone("dropped") == "bad"
    assert status_tone("pending") == "warn"


def test_each_paymaster_of_a_chain_has_its_deposit_row() -> None:
    pm08, pm07 = checksum("0x" + "a8" * 20), checksum("0x" + "a7" * 20)
    deployment = Deployment(
        80002, V08.address, "0x" + "f1" * 20, pm08, "0x" + "f2" * 20,
        entry_point_v07=V07.address, paymaster_v07=pm07,
    )  # fmt: skip
    services = Services()
    services.chains[80002] = ChainRuntime(80002, "", deployment, cast(Any, None), cast(Any, None))
    services.record_deposit(DepositStatus(80002, V07.address, pm07, 2 * 10**18, 10**17))

    rows = deposit_rows(services, [84532, 80002])  # 84532: a chain this service does not run
    assert [(r.chain_id, r.version, r.reading is not None) for r in rows] == [
        (80002, "0.8", False),
        (80002, "0.7", True),
        (84532, None, False),
    ]
    assert (rows[1].amount, rows[1].threshold) == ("2 POL", "0.1 POL")
    assert rows[0].amount == rows[2].amount == NOTHING
