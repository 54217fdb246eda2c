"""The head cache of a process that only accepts ops keeps itself fresh while ops arrive (so
that an op rarely waits for a head read), and reads nothing once they stop."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from entryway.bundler import head as head_module
from entryway.bundler.head import ChainHead
from entryway.chain.rpc import RpcError


class Node:
    """`get_block("latest")` of a chain whose head moves one block per read."""

    def __init__(self) -> None:
        self.reads = 0
        self.failing = False

    async def get_block(self, tag: str) -> dict[str, Any]:
        assert tag == "latest"
        if self.failing:
            raise RpcError(-32000, "node down")
        self.reads += 1
        return {"number": hex(100 + self.reads), "timestamp": hex(10**9), "gasLimit": "0x1c9c380"}


def chain_head(node: Node) -> ChainHead:
    return ChainHead(node)  # type: ignore[arg-type]  # reads only get_block


@pytest.fixture(autouse=True)
def short_warmth(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(head_module, "WARM_FOR_S", 0.4)


async def test_the_head_is_read_ahead_while_ops_arrive_and_not_once_they_stop() -> None:
    node = Node()
    head = chain_head(node)
    first, _, _ = await head.now(max_age_s=0.05, keep_fresh=True)
    assert (first, node.reads) == (101, 1)
    await asyncio.sleep(0.25)
    assert node.reads >= 3  # every ~38 ms, in the background, with no op asking
    await asyncio.sleep(0.6)  # past WARM_FOR_S since the last op
    stopped = node.reads
    await asyncio.sleep(0.2)
    assert node.reads == stopped  # idle: nothing read
    await head.close()


async def test_a_cache_not_asked_to_keep_fresh_reads_only_when_asked() -> None:
    node = Node()
    head = chain_head(node)
    await head.now(max_age_s=0.05)
    await asyncio.sleep(0.2)
    assert node.reads == 1
    await head.now(max_age_s=0.05)
    assert node.reads == 2


async def test_a_failing_node_ends_the_reads_ahead_and_close_stops_them() -> None:
    node = Node()
    head = chain_head(node)
    await head.now(max_age_s=0.05, keep_fresh=True)
    node.failing = True
    await asyncio.sleep(0.15)
    assert head._refresher is not None and head._refresher.done()
    assert head._refresher.exception() is None  # ended quietly: the next op reads and says so
    with pytest.raises(RpcError):
        await head.now(max_age_s=0.05)
    node.failing = False
    await head.now(max_age_s=0.05, keep_fresh=True)  # warm again
    await head.close()
    assert head._refresher.cancelled()


async def test_a_recent_head_is_answered_while_a_read_ahead_is_under_way() -> None:
    node = Node()
    head = chain_head(node)
    await head.now(max_age_s=10.0)
    slow = asyncio.Event()
    fast = node.get_block

    async def stuck(tag: str) -> dict[str, Any]:
        await slow.wait()
        return await fast(tag)

    node.get_block = stuck  # type: ignore[method-assign]
    ahead = asyncio.create_task(head.now(max_age_s=0.0))  # a read, stuck at the node
    await asyncio.sleep(0.05)
    number, _, _ = await asyncio.wait_for(head.now(max_age_s=10.0), timeout=1.0)
    assert number == 101 and not ahead.done()  # answered from the recent read, not held up
    slow.set()
    assert (await ahead)[0] == 102
