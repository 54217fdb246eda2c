"""An in-process bundler leader (as in `entryway up`) that the API wakes for each op it
writes, idle: it reads the intake a few times a second, not twenty times per EntryPoint; a
wake still has it look at once."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from entryway.chain.rpc import EthClient
from entryway.composition.leader import IDLE_WOKEN_POLL_S, run_leader
from entryway.devnet.devnet import Devnet
from entryway.storage.engine import make_engine, migrate, sqlite_url
from entryway.storage.intake import OpIntakeStore
from tests.integration.bundler.test_leader_fencing import funded_chain
from tests.integration.conftest import CHAIN_ID

IDLE_S = 1.5
A_FEW_PER_S = 5  # idle steps a second at most (twenty, polling every 0.05 s)


async def test_an_idle_leader_woken_by_its_api_reads_the_intake_a_few_times_a_second(
    devnet: Devnet, eth: EthClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = make_engine(sqlite_url(tmp_path))
    await migrate(engine)
    chain = await funded_chain(devnet, eth)
    looks: list[float] = []
    open_ops = OpIntakeStore.open_ops

    async def counted(self: OpIntakeStore, *args: Any, **kwargs: Any) -> Any:
        looks.append(asyncio.get_running_loop().time())
        return await open_ops(self, *args, **kwargs)

    monkeypatch.setattr(OpIntakeStore, "open_ops", counted)
    stop, wake, leading = asyncio.Event(), asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(
        run_leader(engine, CHAIN_ID, chain, stop, on_leading=leading.set, wake=wake)
    )
    try:
        await asyncio.wait_for(leading.wait(), 30)
        await asyncio.sleep(0.5)  # the first steps, the bundlers starting
        looks.clear()
        await asyncio.sleep(IDLE_S)
        assert looks, "the idle leader never looked at the intake"
        assert _steps(looks) <= IDLE_S * A_FEW_PER_S + 1, _steps(looks)
        await asyncio.sleep(IDLE_WOKEN_POLL_S / 2)  # between two idle looks
        looks.clear()
        woken = asyncio.get_running_loop().time()
        wake.set()
        for _ in range(100):
            if looks:
                break
            await asyncio.sleep(0.01)
        assert looks and looks[0] - woken < IDLE_WOKEN_POLL_S * 0.8, "the wake went unheard"
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
        await engine.dispose()


def _steps(looks: list[float]) -> int:
    """Steps of the leader: its EntryPoints' looks at the intake come together (gathered)."""
    return sum(1 for i, at in enumerate(looks) if i == 0 or at - looks[i - 1] > 0.03)
