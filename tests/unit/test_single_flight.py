"""Concurrent calls for one key share one load (`storage.single_flight`)."""

from __future__ import annotations

import asyncio

import pytest

from entryway.storage.single_flight import SingleFlight


async def test_concurrent_calls_share_one_load_and_a_later_call_loads_again() -> None:
    flight: SingleFlight[str, int] = SingleFlight()
    loads: list[str] = []
    gate = asyncio.Event()

    async def load() -> int:
        loads.append("x")
        number = len(loads)  # this load's number
        await gate.wait()
        return number

    waiting = [asyncio.create_task(flight("k", load)) for _ in range(20)]
    other = asyncio.create_task(flight("other", load))
    await asyncio.sleep(0)
    gate.set()
    assert await asyncio.gather(*waiting) == [1] * 20  # one load for "k", one for "other"
    assert await other == 2
    assert await flight("k", load) == 3  # done: the next call reads anew


async def test_every_waiter_gets_the_loads_exception() -> None:
    flight: SingleFlight[str, int] = SingleFlight()
    calls = 0

    async def failing() -> int:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.01)
        raise LookupError("gone")

    calls_at_once = (flight("k", failing) for _ in range(5))
    outcomes = await asyncio.gather(*calls_at_once, return_exceptions=True)
    assert calls == 1
    assert all(isinstance(o, LookupError) for o in outcomes)


async def test_a_waiter_that_goes_away_does_not_cancel_the_others() -> None:
    flight: SingleFlight[str, str] = SingleFlight()

    async def slow() -> str:
        await asyncio.sleep(0.05)
        return "read"

    first = asyncio.create_task(flight("k", slow))
    second = asyncio.create_task(flight("k", slow))
    await asyncio.sleep(0.01)
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert await second == "read"
