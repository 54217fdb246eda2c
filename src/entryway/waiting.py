"""Waiting for an event or for a while, without losing a cancellation.

On Python 3.11, `asyncio.wait_for(event.wait(), t)` swallows a cancellation that arrives
as the event is set: it returns as if woken, and a loop stopped by cancelling its task goes
on, so whoever awaits the task after cancelling it waits for ever (a bundler stopped just
as an op arrived never finished stopping). `asyncio.timeout` keeps the cancellation; every
loop that sleeps until woken goes through `woken`."""

from __future__ import annotations

import asyncio


async def woken(event: asyncio.Event, timeout_s: float) -> bool:
    """Wait until `event` is set or `timeout_s` has passed; whether it was set. A
    cancellation of the waiting task always propagates."""
    try:
        async with asyncio.timeout(timeout_s):
            await event.wait()
    except TimeoutError:
        return False
    return True
