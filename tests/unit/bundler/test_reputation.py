from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from entryway.bundler.reputation import Reputation, ReputationStatus

A = "0x1111111111111111111111111111111111111111"


def test_new_entities_are_ok() -> None:
    assert Reputation().status(A) is ReputationStatus.OK


def test_thresholds_follow_erc7562() -> None:
    rep = Reputation()
    rep.set(A, ops_seen=110, ops_included=0)  # 110 // 10 = 11 > 0 + 10
    assert rep.status(A) is ReputationStatus.THROTTLED
    rep.set(A, ops_seen=100, ops_included=0)  # 10, not > 10
    assert rep.status(A) is ReputationStatus.OK
    rep.set(A, ops_seen=510, ops_included=0)  # 51 > 50
    assert rep.status(A) is ReputationStatus.BANNED
    rep.set(A, ops_seen=510, ops_included=2)  # 51 > 52? no; 51 > 12: throttled
    assert rep.status(A) is ReputationStatus.THROTTLED


def test_penalty_bans() -> None:
    rep = Reputation()
    rep.included(A)
    rep.penalise(A)
    assert rep.status(A) is ReputationStatus.BANNED


@given(st.integers(0, 10**6), st.integers(0, 10**6))
def test_hourly_decay_shrinks_to_nothing(seen: int, included: int) -> None:
    rep = Reputation()
    rep.set(A, seen, included)
    for _ in range(400):
        rep.decay()
    assert rep.entries() == []


def test_unseen_never_goes_negative() -> None:
    rep = Reputation()
    rep.unseen(A)
    rep.seen(A)
    rep.unseen(A)
    rep.unseen(A)
    assert rep.entries()[0].ops_seen == 0


def test_unstaked_allowance_follows_urep_020() -> None:
    """10 + floor(opsIncluded / opsSeen * 10) + min(opsIncluded, 10000), as ERC-7562 and the
    reference bundler compute it."""
    rep = Reputation()
    assert rep.ops_allowed_unstaked(A, 10, 10_000) == 10  # never seen
    rep.set(A, ops_seen=10, ops_included=1)
    assert rep.ops_allowed_unstaked(A, 10, 10_000) == 12  # 10 + 1 + 1
    rep.set(A, ops_seen=11, ops_included=1)
    assert rep.ops_allowed_unstaked(A, 10, 10_000) == 11  # 10 + 0 + 1
    rep.set(A, ops_seen=100, ops_included=100)
    assert rep.ops_allowed_unstaked(A, 10, 10_000) == 120
    rep.set(A, ops_seen=0, ops_included=3)  # no rate without a seen op; the included count
    assert rep.ops_allowed_unstaked(A, 10, 10_000) == 13
    rep.set(A, ops_seen=40_000, ops_included=20_000)
    assert rep.ops_allowed_unstaked(A, 10, 10_000) == 10 + 5 + 10_000


@given(st.integers(1, 5_000), st.integers(0, 5_000))
def test_unstaked_allowance_matches_the_reference_float_formula(seen: int, included: int) -> None:
    """The integer floor gives the count the reference bundler's float product gives."""
    rep = Reputation()
    rep.set(A, ops_seen=seen, ops_included=included)
    expected = 10 + math.floor(included / seen * 10) + min(included, 10_000)
    assert rep.ops_allowed_unstaked(A, 10, 10_000) == expected
