"""The block clock's predictions and the auto bundler's schedule (pure, with made-up times)."""

from __future__ import annotations

import pytest

from entryway.bundler.blockclock import BlockClock
from entryway.bundler.schedule import BundleSchedule

POLL_S = 0.1
SPARSE = 5.0  # for tests that give one read per block: count every new block as an arrival


def watched(clock: BlockClock, first_block: int, mined_at: list[float]) -> None:
    """Poll every POLL_S from the first block's time; block k is mined at mined_at[k]."""
    t, end = mined_at[0], mined_at[-1] + POLL_S
    while t <= end:
        number = first_block + sum(1 for m in mined_at if m <= t) - 1
        clock.observe(number, t)
        t = round(t + POLL_S, 6)


def test_no_prediction_until_blocks_were_seen_arriving_at_a_steady_interval() -> None:
    clock = BlockClock(precise_s=SPARSE)
    clock.observe(7, 100.0)  # the first read: block 7 existed, nobody saw it arrive
    clock.observe(8, 100.1)
    assert clock.interval() is None  # the 0.1 s to block 8 is no block interval
    for n in range(9, 11):
        clock.observe(n, 100.1 + (n - 8) * 1.0)
    assert clock.interval() is None  # two gaps are not enough
    clock.observe(11, 103.1)
    assert clock.interval() == pytest.approx(1.0)


def test_the_next_block_is_predicted_within_the_polling_period() -> None:
    clock = BlockClock(precise_s=2.5 * POLL_S)
    mined = [50.03 + 2.0 * k for k in range(8)]  # 2 s blocks, off the polling grid
    watched(clock, 100, mined)
    assert clock.interval() == pytest.approx(2.0, abs=POLL_S)
    block = clock.next_block(now=mined[-1] + 0.5)
    assert block is not None
    assert block.number == 108
    true_time = mined[-1] + 2.0
    assert true_time <= block.due_at + 1e-9  # never later than the truth...
    assert block.due_at - true_time < POLL_S  # ...and close to it


def test_evenly_spaced_timestamps_give_the_interval_from_the_first_arrival() -> None:
    clock = BlockClock(precise_s=SPARSE)
    clock.seed([1000, 1002, 1004, 1006, 1008, 1010])  # 2 s blocks
    assert clock.interval() is None  # no block seen arriving yet: no phase
    clock.observe(20, 50.0)
    clock.observe(21, 51.93)
    assert clock.interval() == 2.0
    block = clock.next_block(now=52.5)
    assert block is not None and (block.number, block.due_at) == (22, pytest.approx(53.93))


def test_the_latest_evenly_spaced_timestamps_seed_whatever_came_before() -> None:
    """A devnet that mined its set-up on demand, then one block a second."""
    clock = BlockClock(precise_s=SPARSE)
    clock.seed([500, 500, 500, 503, 504, 505, 506, 507])
    clock.observe(30, 40.0)
    clock.observe(31, 40.93)
    assert clock.interval() == 1.0


@pytest.mark.parametrize(
    "timestamps",
    [
        [1000, 1001, 1005, 1006, 1007, 1008],
        [7, 7, 7, 7, 7, 7],
        [1000, 1002, 1004, 1006],
        [1000, 1001, 1002, 1003, 1004, 1006],
    ],
)
def test_uneven_equal_or_too_few_timestamps_seed_nothing(timestamps: list[int]) -> None:
    clock = BlockClock(precise_s=SPARSE)
    clock.seed(timestamps)
    clock.observe(1, 0.0)
    clock.observe(2, 1.0)
    assert clock.interval() is None


def test_blocks_found_after_a_slow_read_are_not_arrivals() -> None:
    """An idle bundler reads the head every 2 s: a block found then came at an unknown time
    in those 2 s, so it neither times the interval nor bounds the next block."""
    clock = BlockClock(precise_s=2.5 * POLL_S)
    for n in range(8):
        clock.observe(n, 2.0 * n)
    assert clock.interval() is None
    watched(clock, 20, [30.05, 31.05, 32.05, 33.05, 34.05])  # ops came: fast reads again
    assert clock.interval() == pytest.approx(1.0, abs=POLL_S)


def test_no_prediction_far_beyond_the_last_arrival() -> None:
    clock = BlockClock(precise_s=SPARSE)
    for n in range(6):
        clock.observe(n, float(n))
    assert clock.next_block(now=20.5) is not None
    assert clock.next_block(now=40.5) is None  # 35 blocks on: the phase may have drifted


def test_blocks_mined_on_demand_give_no_prediction() -> None:
    clock = BlockClock(precise_s=SPARSE)
    for number, at in [(1, 0.0), (2, 0.2), (3, 3.1), (4, 3.15), (5, 9.0), (6, 9.4)]:
        clock.observe(number, at)
    assert clock.interval() is None
    assert clock.next_block(now=10.0) is None


def test_a_late_read_does_not_spoil_the_interval() -> None:
    clock = BlockClock(precise_s=SPARSE)
    for n, at in enumerate([0.0, 1.0, 2.0, 3.0, 4.45, 5.0, 6.0, 7.0]):
        clock.observe(n, at)
    assert clock.interval() == pytest.approx(1.0)


def test_a_block_overdue_on_the_clock_means_the_next_one() -> None:
    clock = BlockClock(precise_s=SPARSE)
    for n in range(6):
        clock.observe(n, float(n))
    block = clock.next_block(now=6.2)  # block 6 is mined by 6.0 at the latest: 7 is next
    assert block is not None and (block.number, block.due_at) == (7, pytest.approx(7.0))


def test_a_reorg_to_a_lower_block_starts_the_clock_over() -> None:
    clock = BlockClock(precise_s=SPARSE)
    for n in range(6):
        clock.observe(n, float(n))
    clock.observe(3, 6.0)
    assert clock.interval() is None


def steady_clock() -> BlockClock:
    clock = BlockClock(precise_s=SPARSE)
    for n in range(10):
        clock.observe(n, float(n))  # block n seen at n s; block 10 due at 10.0
    return clock


def test_with_a_steady_interval_one_bundle_goes_out_just_before_each_block() -> None:
    schedule = BundleSchedule(steady_clock(), interval_s=0.1, head_poll_s=POLL_S)
    lead = schedule.lead_s(1.0)
    assert 0 < lead <= 0.5
    assert not schedule.due(9.2)  # ops validated early in the block wait for the deadline
    assert not schedule.due(9.95)  # too close to block 10 (or it is mined, not yet seen)
    assert schedule.due(10.0 - lead + 0.01)
    schedule.sent(10.0 - lead + 0.01, 10.0 - lead + 0.05)
    assert schedule.due(9.7)  # a straggler may still make block 10: a follow-up
    assert not schedule.due(9.8)  # too late for block 10: it waits for block 11's bundle
    assert not schedule.due(10.3)  # block 11's deadline is not there yet
    assert schedule.due(11.0 - schedule.lead_s(1.0) + 0.01)


def test_the_deadline_is_the_moment_the_main_bundle_becomes_due() -> None:
    schedule = BundleSchedule(steady_clock(), interval_s=0.1, head_poll_s=POLL_S)
    deadline = schedule.deadline(9.2)
    assert deadline is not None and 9.5 <= deadline < 10.0  # before block 10, due at 10.0
    assert not schedule.due(deadline - 0.01)
    assert schedule.due(deadline + 0.01)
    schedule.sent(9.5, 9.8)  # slower bundles: the deadline moves earlier
    later = schedule.deadline(10.2)
    assert later is not None and later < 11.0 - (10.0 - deadline)
    assert BundleSchedule(BlockClock(), interval_s=1.0, head_poll_s=POLL_S).deadline(9.2) is None


def test_a_full_bundle_sent_early_leaves_the_deadline_for_the_rest() -> None:
    schedule = BundleSchedule(steady_clock(), interval_s=0.1, head_poll_s=POLL_S)
    schedule.sent(9.2, 9.25, scheduled=False)  # 64 ops were waiting: sent at once
    assert not schedule.due(9.3)
    assert schedule.due(10.0 - schedule.lead_s(1.0) + 0.01)  # the others, at the deadline


def test_slow_bundles_move_the_deadline_earlier() -> None:
    schedule = BundleSchedule(steady_clock(), interval_s=0.1, head_poll_s=POLL_S)
    before = schedule.lead_s(1.0)
    schedule.sent(9.5, 9.8)  # 0.3 s to build and send
    assert schedule.lead_s(1.0) > before
    assert schedule.lead_s(1.0) <= 0.5  # never more than half a block


def test_follow_ups_are_timed_by_the_follow_ups_before_them() -> None:
    schedule = BundleSchedule(steady_clock(), interval_s=0.1, head_poll_s=POLL_S)
    schedule.sent(9.4, 9.55)  # block 10's bundle: 0.15 s, checked while the node was busy
    lead = schedule.lead_s(1.0)
    assert schedule.due(9.6)
    assert not schedule.due(9.7)  # a follow-up is assumed to take as long, for now
    schedule.sent(9.6, 9.61)  # a follow-up of a few stragglers: 0.01 s
    assert schedule.due(9.8)  # the next stragglers may still make block 10
    assert not schedule.due(9.9)  # the head polling period is always left
    assert schedule.lead_s(1.0) == lead  # the block's main bundle is timed by main bundles
    schedule.sent(10.5, 10.7)  # block 11's bundle, slower still
    assert schedule.due(10.85)  # its follow-ups keep their own pace
    assert not schedule.due(10.9)


def test_a_slow_follow_up_does_not_shut_the_next_ones_out() -> None:
    schedule = BundleSchedule(steady_clock(), interval_s=0.1, head_poll_s=POLL_S)
    schedule.sent(9.5, 9.55)  # block 10's bundle
    schedule.sent(9.6, 12.6)  # a follow-up the node held up for 3 s
    for block in (13, 14, 15):  # the main bundles stay quick
        at = block - schedule.lead_s(1.0) + 0.01
        schedule.sent(at, at + 0.05)
    assert schedule.due(15.0 - POLL_S - 0.2)  # stragglers still get a follow-up


def test_without_a_steady_interval_bundles_go_out_every_interval() -> None:
    schedule = BundleSchedule(BlockClock(), interval_s=1.0, head_poll_s=POLL_S)
    assert schedule.due(100.0)  # the first ops go out at once
    schedule.sent(100.0, 100.05)
    assert not schedule.due(100.5)
    assert schedule.due(101.0)
