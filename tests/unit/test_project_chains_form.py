"""The chains a project form names: supported networks the plan allows, one at least."""

from __future__ import annotations

import pytest
from starlette.datastructures import FormData

from entryway.dashboard.project_pages import chosen_chains
from entryway.domain.accounts import AccountError
from entryway.domain.plans import PlanName


def test_ticked_chains_are_taken_once_in_order() -> None:
    form = FormData([("chains", "84532"), ("chains", "80002"), ("chains", "84532")])
    assert chosen_chains(form, PlanName.FREE) == [80002, 84532]


@pytest.mark.parametrize(
    ("ticked", "said"),
    [
        ([], "at least one chain"),
        (["999"], "not a network"),
        (["137"], "testnets only"),
        (["x"], "from the list"),
    ],
)
def test_a_form_without_a_usable_chain_is_refused(ticked: list[str], said: str) -> None:
    with pytest.raises(AccountError) as refused:
        chosen_chains(FormData([("chains", c) for c in ticked]), PlanName.FREE)
    assert said in str(refused.value)
