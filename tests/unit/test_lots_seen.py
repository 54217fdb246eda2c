"""What this process saw of a project's lots is planned from for a moment only, the newest
kept when there are too many projects to remember."""

from __future__ import annotations

from entryway.domain.credits import CreditAccount
from entryway.storage.ledger_postings import LockedProject
from entryway.storage.lots_seen import LotsSeen, Seen


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def seen(read_at: float, overage: int = 0) -> Seen:
    return Seen(LockedProject(overage, None), CreditAccount(), read_at)


def test_a_read_is_planned_from_until_its_moment_is_over_and_writes_do_not_renew_it() -> None:
    clock = Clock()
    lots = LotsSeen(1.0, clock=clock)
    assert lots.get("p") is None
    lots.put("p", seen(clock.now))
    clock.now += 0.6
    lots.put("p", seen(100.0, overage=7))  # a write since: the read's time is kept
    got = lots.get("p")
    assert got is not None and got.locked.cycle_overage == 7
    clock.now += 0.4
    assert lots.get("p") is None


def test_a_project_whose_write_failed_is_read_again() -> None:
    lots = LotsSeen(clock=Clock())
    lots.put("p", seen(100.0))
    lots.forget("p")
    lots.forget("never seen")
    assert lots.get("p") is None


def test_too_many_projects_let_the_oldest_read_go_first() -> None:
    clock = Clock()
    lots = LotsSeen(max_projects=2, clock=clock)
    lots.put("a", seen(100.0))
    lots.put("b", seen(100.0))
    lots.put("a", seen(100.0))  # seen again: now the newest
    lots.put("c", seen(100.0))
    assert lots.get("b") is None
    assert lots.get("a") is not None and lots.get("c") is not None


def test_a_write_replaces_the_view_it_was_planned_from_and_no_other() -> None:
    lots = LotsSeen(clock=Clock())
    planned_from = seen(100.0)
    lots.put("p", planned_from)
    first, second = seen(100.0, overage=1), seen(100.0, overage=2)
    lots.wrote("p", planned_from, first)  # the view it was planned from: replaced
    assert lots.get("p") is first
    lots.wrote("p", planned_from, second)  # planned from the same, written side by side
    assert lots.get("p") is None  # neither view holds the other's draws: read afresh
    lots.wrote("p", planned_from, second)  # nothing kept: its view is the only one
    assert lots.get("p") is second
