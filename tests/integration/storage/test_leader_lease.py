"""The bundler leader's election on SQLite: a lease row, renewed by its holder. Two
candidates over one database file (two engines: as two processes on one data directory)
never both lead; a released lease, an expired one, or one held by a process of this host
that has exited passes to the standby."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.storage.engine import make_engine, migrate, sqlite_url
from entryway.storage.leader_lock import LeaderLock, holder_is_gone, leader_key

KEY = leader_key(31337, ["0x00000000000000000000000000000000000000aa"])


@pytest.fixture
async def engines(tmp_path: Path) -> AsyncIterator[tuple[AsyncEngine, AsyncEngine]]:
    first, second = make_engine(sqlite_url(tmp_path)), make_engine(sqlite_url(tmp_path))
    await migrate(first)
    yield first, second
    await first.dispose()
    await second.dispose()


async def test_one_leads_and_the_other_stands_by_until_it_releases(
    engines: tuple[AsyncEngine, AsyncEngine],
) -> None:
    first, second = LeaderLock(engines[0], KEY), LeaderLock(engines[1], KEY)
    assert await first.try_acquire()
    assert not await second.try_acquire()
    assert await first.still_held()
    assert not await second.still_held()
    await first.release()
    assert await second.try_acquire()
    assert not await first.try_acquire()


async def test_an_expired_lease_passes_and_its_old_holder_knows(
    engines: tuple[AsyncEngine, AsyncEngine],
) -> None:
    # A holder that stopped renewing (its event loop stuck, its host cut off).
    stuck = LeaderLock(engines[0], KEY, lease_s=0.6)
    standby = LeaderLock(engines[1], KEY, lease_s=0.6)
    assert await stuck.try_acquire()
    assert not await standby.try_acquire()
    await asyncio.sleep(0.7)  # past the lease
    assert await standby.try_acquire()
    assert not await stuck.still_held()  # it must stop: another leads
    assert await standby.still_held()


async def test_a_lease_held_by_a_dead_process_of_this_host_passes_at_once(
    engines: tuple[AsyncEngine, AsyncEngine],
) -> None:
    exited = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
    await exited.wait()  # exited and reaped
    dead = f"{socket.gethostname()}:{exited.pid}:00000000"
    assert holder_is_gone(dead)
    killed = LeaderLock(engines[0], KEY, holder=dead)  # as it was written before the kill
    assert await killed.try_acquire()
    assert await LeaderLock(engines[1], KEY).try_acquire()  # no wait for the lease to expire


def test_a_running_process_or_another_host_is_not_taken_for_dead() -> None:
    assert not holder_is_gone(f"{socket.gethostname()}:{os.getppid()}:00000000")
    assert not holder_is_gone(f"{socket.gethostname()}:{os.getpid()}:00000000")
    assert not holder_is_gone("elsewhere.example:1:00000000")
