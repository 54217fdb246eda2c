"""`woken`: a loop that sleeps until woken stops when its task is cancelled, even when the
cancellation comes as the event is set (Python 3.11's `asyncio.wait_for` returns then, as if
woken, and the loop goes on)."""

from __future__ import annotations

import asyncio

from entryway.waiting import woken


async def test_woken_says_whether_the_event_was_set() -> None:
    event = asyncio.Event()
    assert await woken(event, 0.01) is False
    event.set()
    assert await woken(event, 10) is True


async def test_a_cancellation_as_the_event_is_set_stops_the_loop() -> None:
    event = asyncio.Event()
    rounds = 0

    async def loop() -> None:
        nonlocal rounds
        while True:
            await woken(event, 10)
            event.clear()
            rounds += 1

    task = asyncio.create_task(loop())
    await asyncio.sleep(0.01)  # asleep in `woken`
    event.set()
    task.cancel()
    done, _ = await asyncio.wait([task], timeout=2)
    assert done and task.cancelled() and rounds == 0
