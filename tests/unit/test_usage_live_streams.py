"""The cap on live usage streams: a few per session, a bounded number in all, slots given
back when a stream ends, and slots a failed stream never gave back taken back in time."""

from __future__ import annotations

from entryway.dashboard.live_streams import StreamSlots


def test_a_session_gets_a_few_streams_and_others_still_get_theirs() -> None:
    slots = StreamSlots(per_viewer=2, in_all=10)
    first, second = slots.take("a"), slots.take("a")
    assert first and second and first != second
    assert slots.take("a") is None
    assert slots.take("b") is not None
    slots.give_back(first)
    assert slots.take("a") is not None


def test_the_process_has_a_ceiling_whoever_asks() -> None:
    slots = StreamSlots(per_viewer=5, in_all=3)
    taken = [slots.take(v) for v in ("a", "b", "c")]
    assert all(taken)
    assert slots.take("d") is None
    assert slots.open_count() == 3


def test_a_slot_never_given_back_expires_after_a_stream_s_lifetime() -> None:
    now = [0.0]
    slots = StreamSlots(per_viewer=1, in_all=5, lifetime=600, clock=lambda: now[0])
    assert slots.take("a") is not None
    now[0] = 600.0
    assert slots.take("a") is None  # a stream may still be using it
    now[0] = 700.0
    assert slots.take("a") is not None
    assert slots.open_count("a") == 1
