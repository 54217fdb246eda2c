"""Credits held in lots: each month's grant and each purchase is a lot valid 12 months from
its date; consumption takes the oldest unexpired lot first (FIFO); expired credit is gone;
what the lots cannot cover is overage, recorded, never refused (requirements §3 and §8). Pure.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum

from entryway.domain.bounds import MAX_CREDITS
from entryway.errors import EntrywayError

LOT_VALIDITY_MONTHS = 12


class LotKind(StrEnum):
    GRANT = "grant"  # a plan's monthly allowance
    PURCHASE = "purchase"
    ADJUSTMENT = "adjustment"  # granted by an operator


class CreditError(EntrywayError):
    pass


class BudgetExceededError(CreditError):
    """A hold that would take the cycle's overage past the spending budget its project's
    owner chose. Without a budget no hold is ever refused for credits."""

    def __init__(self, credits: int, overage: int, budget: int) -> None:
        super().__init__(
            f"this op holds {credits} credits, which would take this cycle's overage past the "
            f"project's spending budget of {budget} credits ({overage} used so far)"
        )
        self.credits = credits
        self.overage = overage
        self.budget = budget


def check_amount(credits: int, what: str = "a credit amount") -> int:
    """`credits` when the database can hold it (0 to MAX_CREDITS); refused, never clamped."""
    if not 0 <= credits <= MAX_CREDITS:
        raise CreditError(f"{what} must be from 0 to {MAX_CREDITS}, not {credits}")
    return credits


def check_hold(credits: int, overage: int, cycle_overage: int, budget: int | None) -> None:
    """Refuse a hold whose `overage` (what the lots do not cover) would take the cycle's
    overage past the owner's budget (BudgetExceededError). A hold the lots cover, and any
    hold of a project without a budget, always goes through."""
    if budget is not None and overage and cycle_overage + overage > budget:
        raise BudgetExceededError(credits, cycle_overage, budget)


def add_months(moment: datetime, months: int) -> datetime:
    """The same day and time `months` later; a day the target month lacks becomes its last."""
    index = moment.month - 1 + months
    year, month = moment.year + index // 12, index % 12 + 1
    day = min(moment.day, calendar.monthrange(year, month)[1])
    return moment.replace(year=year, month=month, day=day)


@dataclass(frozen=True, slots=True)
class CreditLot:
    lot_id: str
    kind: LotKind
    amount: int
    remaining: int
    granted_at: datetime
    expires_at: datetime

    @classmethod
    def new(cls, lot_id: str, kind: LotKind, amount: int, at: datetime) -> CreditLot:
        if amount <= 0:
            raise CreditError("a credit lot holds a positive amount")
        check_amount(amount, "a credit lot")
        return cls(lot_id, kind, amount, amount, at, add_months(at, LOT_VALIDITY_MONTHS))

    def live(self, at: datetime) -> bool:
        return at < self.expires_at and self.remaining > 0


@dataclass(frozen=True, slots=True)
class Draw:
    """Credits taken from one lot by one consumption."""

    lot_id: str
    credits: int


@dataclass(frozen=True, slots=True)
class Consumption:
    credits: int
    draws: tuple[Draw, ...]
    overage: int  # the part no lot covered

    @property
    def from_lots(self) -> int:
        return sum(d.credits for d in self.draws)


@dataclass(frozen=True, slots=True)
class CreditAccount:
    """One project's credits: its lots (oldest first) and this cycle's overage."""

    lots: tuple[CreditLot, ...] = ()
    cycle_overage: int = 0

    def balance(self, at: datetime) -> int:
        return sum(lot.remaining for lot in self.lots if lot.live(at))

    def add(self, lot: CreditLot) -> CreditAccount:
        if any(existing.lot_id == lot.lot_id for existing in self.lots):
            raise CreditError(f"lot {lot.lot_id} already exists")
        lots = sorted((*self.lots, lot), key=lambda x: (x.granted_at, x.lot_id))
        return replace(self, lots=tuple(lots))

    def consume(self, credits: int, at: datetime) -> tuple[CreditAccount, Consumption]:
        if credits < 0:
            raise CreditError("cannot consume a negative amount")
        check_amount(credits, "a charge")
        left = credits
        draws: list[Draw] = []
        lots: list[CreditLot] = []
        for lot in self.lots:
            if left and lot.live(at) and lot.granted_at <= at:
                take = min(lot.remaining, left)
                left -= take
                draws.append(Draw(lot.lot_id, take))
                lot = replace(lot, remaining=lot.remaining - take)
            lots.append(lot)
        consumption = Consumption(credits, tuple(draws), left)
        return replace(self, lots=tuple(lots), cycle_overage=self.cycle_overage + left), consumption

    def refund(self, draws: tuple[Draw, ...], overage: int) -> CreditAccount:
        """Undo a consumption (a released hold): its credits go back to the lots they came
        from, even if those have expired since (then they expire with them)."""
        back = {d.lot_id: d.credits for d in draws}
        lots = tuple(
            replace(lot, remaining=lot.remaining + back.pop(lot.lot_id, 0)) for lot in self.lots
        )
        if back:
            raise CreditError(f"unknown lots {sorted(back)}")
        if overage > self.cycle_overage:
            raise CreditError("refunding more overage than was recorded")
        return replace(self, lots=lots, cycle_overage=self.cycle_overage - overage)

    def expired(self, at: datetime) -> int:
        """Credits that expired unused by `at` (still listed, no longer spendable)."""
        return sum(lot.remaining for lot in self.lots if at >= lot.expires_at)

    def close_cycle(self) -> tuple[CreditAccount, int]:
        """End of a billing cycle: the overage to bill, and a fresh count."""
        return replace(self, cycle_overage=0), self.cycle_overage
