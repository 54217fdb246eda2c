"""An in-process bundler leader whose intake steps fail for the database while its lock still
holds (PostgreSQL read-only, as after a managed database runs low on disk, or out of
connections for a new one): it keeps stepping, logs the outage once, without a traceback,
and its end once, not a traceback every 50 ms. The failure is PostgreSQL's own, raised by a
write to a database set read-only, and injected into the intake's reads for a moment."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from entryway.chain.rpc import EthClient
from entryway.composition.leader import run_leader
from entryway.devnet.devnet import Devnet
from entryway.storage.engine import make_engine, migrate, sqlite_url
from entryway.storage.intake import OpIntakeStore
from entryway.storage.outage import database_unavailable
from tests.integration.bundler.test_leader_fencing import funded_chain
from tests.integration.conftest import CHAIN_ID
from tests.integration.postgres import fresh_database

LEADER_LOG = "entryway.bundler.leader"


async def read_only_refusal() -> Exception:
    """What PostgreSQL raises, through the engine, for a write to a read-only database."""
    async with fresh_database("read-only PostgreSQL") as (url, _):
        engine = make_engine(url)
        try:
            async with engine.begin() as db:
                await db.execute(text("SET TRANSACTION READ ONLY"))
                await db.execute(text("CREATE TABLE refused (n int)"))
        except Exception as exc:
            return exc
        finally:
            await engine.dispose()
    raise AssertionError("a read-only transaction took a write")


async def test_a_leader_logs_a_database_outage_once_and_its_end_once(
    devnet: Devnet,
    eth: EthClient,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    refusal = await read_only_refusal()
    assert database_unavailable(refusal), refusal
    engine = make_engine(sqlite_url(tmp_path))
    await migrate(engine)
    chain = await funded_chain(devnet, eth)
    open_ops = OpIntakeStore.open_ops
    refusing = False
    steps = 0

    async def reads(self: OpIntakeStore, *args: Any, **kwargs: Any) -> Any:
        nonlocal steps
        steps += 1
        if refusing:
            raise refusal
        return await open_ops(self, *args, **kwargs)

    monkeypatch.setattr(OpIntakeStore, "open_ops", reads)
    caplog.set_level(logging.DEBUG, logger=LEADER_LOG)
    stop, leading = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(run_leader(engine, CHAIN_ID, chain, stop, on_leading=leading.set))
    try:
        await asyncio.wait_for(leading.wait(), 30)
        await asyncio.sleep(0.3)
        refusing, before = True, steps
        await asyncio.sleep(1.0)  # about twenty steps, each refused
        refused_steps = steps - before
        refusing = False
        await asyncio.sleep(0.3)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
        await engine.dispose()
    assert refused_steps >= 5, refused_steps  # it kept stepping through the outage
    said = [r for r in caplog.records if r.name == LEADER_LOG and "database" in r.getMessage()]
    assert [r.levelno for r in said] == [logging.WARNING, logging.INFO], said
    assert said[0].exc_info is None
    assert "ReadOnlySQLTransactionError" in said[0].getMessage()
    assert not [r for r in caplog.records if "intake step failed" in r.getMessage()]
