"""One read for many callers: concurrent calls for the same key share one call of the
loader, each getting its result (or its exception).

A cache that expires under load is read again by every request in flight at that moment:
dozens of identical statements at once, each on a connection of its own, past the pool's
size, so that the pool opens connections only to close them again. With a single flight,
the first caller reads and the others wait for that read."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SingleFlight(Generic[K, V]):
    def __init__(self) -> None:
        self._running: dict[K, asyncio.Future[V]] = {}

    async def __call__(self, key: K, load: Callable[[], Awaitable[V]]) -> V:
        loop = asyncio.get_running_loop()
        running = self._running.get(key)
        if running is None or running.get_loop() is not loop:
            running = self._start(key, load)
        # A caller that goes away (cancelled) does not cancel the others' read.
        return await asyncio.shield(running)

    def _start(self, key: K, load: Callable[[], Awaitable[V]]) -> asyncio.Future[V]:
        async def call() -> V:
            return await load()

        running = asyncio.ensure_future(call())
        self._running[key] = running

        def done(finished: asyncio.Future[V]) -> None:
            if self._running.get(key) is finished:
                del self._running[key]
            if not finished.cancelled():
                finished.exception()  # retrieved: every waiter may have gone

        running.add_done_callback(done)
        return running
