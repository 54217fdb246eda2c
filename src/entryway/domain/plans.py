"""Subscription plans (requirements §8.1), as data. Money is integer micro-euros (1 EUR =
1,000,000 µEUR), VAT included; credits are integers."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

MICRO_EUR_PER_EUR = 1_000_000
# The plans price credits at 1 EUR per million (STARTER: 5 EUR for 5M), i.e. 1 µEUR a credit.
MICRO_EUR_PER_CREDIT = 1


class PlanName(StrEnum):
    FREE = "FREE"
    STARTER = "STARTER"
    PRO = "PRO"
    SCALE = "SCALE"
    ENTERPRISE = "ENTERPRISE"


class SupportLevel(StrEnum):
    COMMUNITY = "community"
    PRIORITY = "priority"
    SLA = "sla_and_dedicated_account_manager"


@dataclass(frozen=True, slots=True)
class Plan:
    name: PlanName
    # None: set per contract (ENTERPRISE is "custom" / "flexible").
    monthly_price_micro_eur: int | None
    monthly_credits: int | None
    mainnet: bool
    support: SupportLevel
    overage_micro_eur_per_credit: int = MICRO_EUR_PER_CREDIT

    @property
    def is_custom(self) -> bool:
        return self.monthly_credits is None


PLANS: dict[PlanName, Plan] = {
    p.name: p
    for p in (
        Plan(PlanName.FREE, 0, 1_000_000, False, SupportLevel.COMMUNITY),
        Plan(PlanName.STARTER, 5 * MICRO_EUR_PER_EUR, 5_000_000, True, SupportLevel.COMMUNITY),
        Plan(PlanName.PRO, 20 * MICRO_EUR_PER_EUR, 20_000_000, True, SupportLevel.PRIORITY),
        Plan(PlanName.SCALE, 50 * MICRO_EUR_PER_EUR, 50_000_000, True, SupportLevel.PRIORITY),
        Plan(PlanName.ENTERPRISE, None, None, True, SupportLevel.SLA),
    )
}


def plan(name: PlanName | str) -> Plan:
    return PLANS[PlanName(name)]
