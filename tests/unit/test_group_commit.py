"""Group commit (`storage.ledger_group`): callers arriving while a write is under way are
written together, and a group that fails is written item by item, each caller getting its
own outcome."""

from __future__ import annotations

import asyncio

import pytest

from entryway.storage.ledger_group import GroupCommit


class RefusedError(RuntimeError):
    pass


class Database:
    """Writes items, refusing any group that holds a "bad" item, as a transaction would."""

    def __init__(self) -> None:
        self.transactions: list[list[str]] = []
        self.written: list[str] = []

    async def many(self, items: list[str]) -> list[str]:
        await asyncio.sleep(0.01)  # a commit takes time: others arrive meanwhile
        if "bad" in items:
            raise RefusedError("the group is refused")
        self.transactions.append(items)
        self.written += items
        return [f"{item}:ok" for item in items]

    async def one(self, item: str) -> str:
        return (await self.many([item]))[0]


async def test_concurrent_items_share_transactions_and_each_is_written_once() -> None:
    db = Database()
    commit = GroupCommit(db.many, db.one)
    items = [f"op{i}" for i in range(40)]
    results = await asyncio.gather(*(commit(item) for item in items))
    assert results == [f"{item}:ok" for item in items]
    assert sorted(db.written) == sorted(items)
    assert len(db.transactions) <= 3  # the first alone, then the rest together


async def test_one_failing_item_does_not_sink_the_others_of_its_group() -> None:
    db = Database()
    commit = GroupCommit(db.many, db.one)
    items = ["first", "a", "bad", "b", "c"]
    outcomes = await asyncio.gather(*(commit(item) for item in items), return_exceptions=True)
    assert outcomes[0] == "first:ok"
    assert isinstance(outcomes[2], RefusedError)
    assert [outcomes[i] for i in (1, 3, 4)] == ["a:ok", "b:ok", "c:ok"]
    assert sorted(db.written) == ["a", "b", "c", "first"]


async def test_a_group_is_at_most_the_limit() -> None:
    db = Database()
    commit = GroupCommit(db.many, db.one, limit=4)
    await asyncio.gather(*(commit(f"op{i}") for i in range(13)))
    assert max(len(t) for t in db.transactions) == 4
    assert len(db.written) == 13


async def test_a_caller_that_goes_away_does_not_stop_the_others() -> None:
    db = Database()
    commit = GroupCommit(db.many, db.one)
    first = asyncio.ensure_future(commit("first"))
    await asyncio.sleep(0)
    waiting = [asyncio.ensure_future(commit(f"op{i}")) for i in range(3)]
    await asyncio.sleep(0)
    waiting[0].cancel()
    assert await first == "first:ok"
    assert await asyncio.gather(*waiting[1:]) == ["op1:ok", "op2:ok"]
    with pytest.raises(asyncio.CancelledError):
        await waiting[0]


class SlowDatabase(Database):
    """Counts the writes under way at once."""

    def __init__(self) -> None:
        super().__init__()
        self.under_way = 0
        self.most_at_once = 0

    async def many(self, items: list[str]) -> list[str]:
        self.under_way += 1
        self.most_at_once = max(self.most_at_once, self.under_way)
        try:
            return await super().many(items)
        finally:
            self.under_way -= 1


@pytest.mark.parametrize("depth", [1, 2, 3])
async def test_with_a_depth_that_many_groups_are_written_at_once_and_no_more(depth: int) -> None:
    db = SlowDatabase()
    commit = GroupCommit(db.many, db.one, depth=depth)

    async def arriving(i: int) -> str:
        await asyncio.sleep(0.003 * i)  # one after another, while writes are under way
        return await commit(f"op{i}")

    items = 30
    results = await asyncio.gather(*(arriving(i) for i in range(items)))
    assert results == [f"op{i}:ok" for i in range(items)]
    assert sorted(db.written) == sorted(f"op{i}" for i in range(items))
    assert db.most_at_once == depth


def test_a_depth_under_one_is_refused() -> None:
    db = Database()
    with pytest.raises(ValueError, match="at least one group"):
        GroupCommit(db.many, db.one, depth=0)


class InstantDatabase(Database):
    """Writes without waiting: whatever turns of the event loop a caller waits are the group
    commit's own."""

    async def many(self, items: list[str]) -> list[str]:
        self.transactions.append(items)
        self.written += items
        return [f"{item}:ok" for item in items]


def test_a_caller_finding_nothing_under_way_writes_its_item_without_waiting_a_turn() -> None:
    db = InstantDatabase()
    commit = GroupCommit(db.many, db.one)

    async def alone() -> None:
        call = commit("first").__await__()
        with pytest.raises(StopIteration) as finished:
            call.send(None)  # runs to its end at once: no task started, no wake-up awaited
        assert finished.value.value == "first:ok"

    asyncio.run(alone())
    assert db.written == ["first"]


async def test_items_that_arrived_while_a_caller_wrote_are_written_though_it_went_away() -> None:
    db = Database()
    commit = GroupCommit(db.many, db.one)
    first = asyncio.ensure_future(commit("first"))
    await asyncio.sleep(0)  # the first caller's write is under way
    waiting = [asyncio.ensure_future(commit(f"op{i}")) for i in range(3)]
    await asyncio.sleep(0)
    first.cancel()
    assert await asyncio.gather(*waiting) == ["op0:ok", "op1:ok", "op2:ok"]
    assert db.transactions == [["op0", "op1", "op2"]]  # together, after the first went away
    with pytest.raises(asyncio.CancelledError):
        await first
