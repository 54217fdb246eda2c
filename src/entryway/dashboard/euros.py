"""Money on the billing pages: integer micro-euros shown as euros, exactly (no float)."""

from __future__ import annotations

from entryway.domain.plans import MICRO_EUR_PER_EUR


def euros(micro_eur: int) -> str:
    """Cents always, more digits only when they are not zero: 5,000,500 -> "5.0005",
    20,000,000 -> "20.00"."""
    whole, fraction = divmod(micro_eur, MICRO_EUR_PER_EUR)
    digits = f"{fraction:06d}".rstrip("0").ljust(2, "0")
    return f"{whole:,}.{digits}"


def per_million(rate_micro_eur_per_credit: int) -> str:
    """An overage rate as euros per million credits (1 µEUR a credit is 1 EUR a million)."""
    return euros(rate_micro_eur_per_credit * MICRO_EUR_PER_EUR)
