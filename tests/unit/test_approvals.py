"""Which plan changes wait for the operator, credit packs, per-project ENTERPRISE terms and
how the billing pages write euros."""

from __future__ import annotations

import pytest

from entryway.dashboard.euros import euros, per_million
from entryway.domain.approvals import CREDIT_PACKS, plan_change_needs_approval
from entryway.domain.billing import BillingConfig, EnterpriseTerms
from entryway.domain.credits import CreditError
from entryway.domain.plans import PlanName, plan


@pytest.mark.parametrize(
    ("current", "to", "waits"),
    [
        (PlanName.FREE, PlanName.STARTER, True),
        (PlanName.FREE, PlanName.ENTERPRISE, True),
        (PlanName.PRO, PlanName.SCALE, True),
        (PlanName.SCALE, PlanName.ENTERPRISE, True),  # by contract: counted as raising
        (PlanName.SCALE, PlanName.PRO, False),  # a cheaper paid plan lowers the bill
        (PlanName.PRO, PlanName.STARTER, False),
        (PlanName.PRO, PlanName.FREE, False),
        (PlanName.ENTERPRISE, PlanName.SCALE, False),  # from a contract to a listed plan
        (PlanName.ENTERPRISE, PlanName.FREE, False),
        (PlanName.PRO, PlanName.PRO, False),  # cancels a scheduled change
        (PlanName.FREE, PlanName.FREE, False),
        (PlanName.ENTERPRISE, PlanName.ENTERPRISE, False),
    ],
)
def test_only_a_move_that_raises_the_bill_waits(
    current: PlanName, to: PlanName, waits: bool
) -> None:
    assert plan_change_needs_approval(current, to) is waits


def test_packs_are_priced_like_the_plans_credits() -> None:
    assert {p.name: (p.credits, p.price_micro_eur) for p in CREDIT_PACKS.values()} == {
        "5M": (5_000_000, 5_000_000),
        "20M": (20_000_000, 20_000_000),
        "100M": (100_000_000, 100_000_000),
    }


def test_a_projects_enterprise_terms_replace_only_what_they_set() -> None:
    service = BillingConfig(enterprise_monthly_micro_eur=7, enterprise_monthly_credits=9)
    enterprise = plan(PlanName.ENTERPRISE)
    own = service.with_terms(EnterpriseTerms(1_000, None))
    assert (own.monthly_price(enterprise), own.monthly_grant(enterprise)) == (1_000, 9)
    both = service.with_terms(EnterpriseTerms(0, 50))
    assert (both.monthly_price(enterprise), both.monthly_grant(enterprise)) == (0, 50)
    assert service.with_terms(EnterpriseTerms()) == service
    assert both.monthly_grant(plan(PlanName.PRO)) == 20_000_000  # other plans keep theirs
    with pytest.raises(CreditError):
        EnterpriseTerms(None, -1)


def test_euros_are_exact() -> None:
    assert euros(0) == "0.00"
    assert euros(20_000_000) == "20.00"
    assert euros(5_000_500) == "5.0005"
    assert euros(1_234_567_890_000) == "1,234,567.89"
    assert euros(1) == "0.000001"
    assert per_million(1) == "1.00"
    assert per_million(3) == "3.00"
