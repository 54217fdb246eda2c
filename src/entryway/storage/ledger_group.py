"""Group commit: what concurrent callers write to the ledger, written together.

The first caller's item is written at once, by the caller itself; items arriving while it is
written wait for it and are then written together by a task of their own, in one transaction
(`many`), up to `limit` at a time. Concurrent requests so share one commit and one turn at
their project's lock instead of queueing for it one transaction each, and none waits longer
than one commit for its turn. When a group's transaction fails (an item the database
refuses, a twin committed by another process first), it rolls back whole and each item is
written on its own (`one`), so each caller gets its own outcome: one bad item never sinks
the others.

With `depth` above one, up to that many groups are written at once: an item arriving while
fewer are under way starts a group of its own at once instead of waiting for the one ahead
(for writes that hold no lock across round trips, `ledger_at_once`); past that, items wait
and go together, as with one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class GroupCommit(Generic[T, R]):
    def __init__(
        self,
        many: Callable[[list[T]], Awaitable[list[R]]],
        one: Callable[[T], Awaitable[R]],
        *,
        limit: int = 200,
        depth: int = 1,
    ) -> None:
        if depth < 1:
            raise ValueError("a group commit writes at least one group at a time")
        self.many = many
        self.one = one
        self.limit = limit
        self.depth = depth
        self._waiting: list[tuple[T, asyncio.Future[R]]] = []
        self._committers: list[asyncio.Task[None]] = []
        self._inline: set[asyncio.Task[object]] = set()  # callers writing their own item

    async def __call__(self, item: T) -> R:
        loop = asyncio.get_running_loop()
        self._committers = [c for c in self._committers if not c.done() and c.get_loop() is loop]
        self._inline = {t for t in self._inline if not t.done() and t.get_loop() is loop}
        caller = asyncio.current_task()
        if not self._waiting and self._under_way() < self.depth and caller is not None:
            # Nothing queued and a group free: written at once by its caller, in its own
            # task; a task of the group's would cost two turns of a busy event loop (its
            # start, then the caller's wake-up). A caller that goes away takes only its own
            # item with it; those that arrived meanwhile go on without it (`_hand_over`).
            self._inline.add(caller)
            try:
                return await self.one(item)
            finally:
                self._inline.discard(caller)
                self._hand_over(loop)
        done: asyncio.Future[R] = loop.create_future()
        self._waiting.append((item, done))
        self._hand_over(loop)
        return await done

    def _under_way(self) -> int:
        return len(self._committers) + len(self._inline)

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        """Items are waiting and a group is free: a task of the group's writes them, so
        that a caller that goes away does not stop the others' commit."""
        if self._waiting and self._under_way() < self.depth:
            self._committers.append(loop.create_task(self._commit_waiting()))

    async def _commit_waiting(self) -> None:
        while self._waiting:
            group = self._waiting[: self.limit]
            del self._waiting[: self.limit]
            try:
                await self._commit(group)
            except BaseException:  # cancelled: no waiter is left hanging
                group += self._waiting
                self._waiting = []
                for _, waiter in group:
                    waiter.cancel()
                raise

    async def _commit(self, group: list[tuple[T, asyncio.Future[R]]]) -> None:
        if len(group) > 1:
            try:
                results = await self.many([item for item, _ in group])
            except Exception:
                results = None  # each item is written again on its own, below
            if results is not None:
                for (_, waiter), result in zip(group, results, strict=True):
                    if not waiter.done():
                        waiter.set_result(result)
                return
        for item, waiter in group:
            try:
                result = await self.one(item)
            except Exception as exc:
                if not waiter.done():
                    waiter.set_exception(exc)
            else:
                if not waiter.done():
                    waiter.set_result(result)
