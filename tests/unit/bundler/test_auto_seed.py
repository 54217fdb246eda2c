"""The auto bundler's head watch: it reads recent blocks' timestamps again at each new head
until they give the block interval (with a fake node; the watch loop runs for real)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from entryway.bundler.auto import SEED_TRIES, AutoBundler
from entryway.bundler.states import BundlingMode


class Chain:
    """Blocks 0..9 mined on demand within one second; then, after a pause, one a second."""

    def __init__(self) -> None:
        self.timestamps = [100] * 10 + [104, 105, 106]
        self.batches = 0

    def mine(self) -> None:
        self.timestamps.append(self.timestamps[-1] + 1)

    async def block_number(self) -> int:
        return len(self.timestamps) - 1

    async def batch(self, calls: list[tuple[str, list[Any]]]) -> list[dict[str, str]]:
        self.batches += 1
        return [{"timestamp": hex(self.timestamps[int(p[0], 16)])} for _, p in calls]


def watcher(chain: Chain) -> AutoBundler:
    config = SimpleNamespace(head_poll_s=0.005, auto_bundle_interval_s=0.1)
    eth = SimpleNamespace(block_number=chain.block_number, rpc=SimpleNamespace(batch=chain.batch))
    bundler: Any = SimpleNamespace(config=config, eth=eth, mode=BundlingMode.AUTO, mempool=[])
    return AutoBundler(bundler)


async def test_the_interval_is_learnt_from_timestamps_once_the_chain_mines_steadily() -> None:
    chain = Chain()
    auto = watcher(chain)
    task = asyncio.create_task(auto.watch_head_loop())
    try:
        await asyncio.sleep(0.05)
        assert chain.batches == 1  # read at start: two steady gaps are not enough
        for _ in range(2):  # two more blocks a second apart, each seen at once
            chain.mine()
            await asyncio.sleep(0.03)
        # Seen arriving 30 ms apart, these blocks could never give a 1 s interval: it is
        # the timestamps, read again at a new head, that do.
        assert chain.batches == 3
        assert auto.clock.interval() == 1.0
        tries = chain.batches
        chain.mine()
        await asyncio.sleep(0.03)
        assert chain.batches == tries  # known: no more reads
    finally:
        task.cancel()


async def test_a_chain_without_a_steady_interval_is_asked_a_bounded_number_of_times() -> None:
    chain = Chain()
    auto = watcher(chain)
    task = asyncio.create_task(auto.watch_head_loop())
    try:
        for n in range(SEED_TRIES + 5):  # mined on demand: same second, irregular arrivals
            chain.timestamps.append(chain.timestamps[-1])
            await asyncio.sleep(0.02 if n % 2 else 0.06)
        assert auto.clock.interval() is None
        assert chain.batches == 1 + SEED_TRIES
    finally:
        task.cancel()
