"""The bundler leader's election on PostgreSQL, in process over the devnet: a second
candidate stands by while the first leads; when the leader's lock connection dies (its
session ends, as when its process is killed or cut off), the leader stops at once rather
than bundle beside a new one, and the standby leads."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from entryway.chain.rpc import EthClient
from entryway.composition.leader import LeadershipLostError, run_leader
from entryway.devnet.devnet import Devnet
from entryway.domain.networks import fee_rules_for
from entryway.settings.commands import BundlerChain
from entryway.storage.engine import make_engine, migrate
from tests.integration.conftest import CHAIN_ID
from tests.integration.harness import ETHER, Harness
from tests.integration.postgres import ADMIN_URL, fresh_database


@pytest.fixture
async def database() -> AsyncIterator[tuple[str, str]]:
    async with fresh_database("leader election") as (url, name):
        engine = make_engine(url)
        await migrate(engine)
        await engine.dispose()
        yield url, name


async def funded_chain(devnet: Devnet, eth: EthClient) -> BundlerChain:
    """The devnet's chain as a leader bundles it, with an executor key of its own, funded."""
    executor = Harness.new_key()
    await eth.rpc.request("anvil_setBalance", [executor.address, hex(1000 * ETHER)])
    return BundlerChain(
        (devnet.chains[0].rpc_url,),
        (executor,),
        devnet.chains[0].deployment.entry_point,
        fee_rules_for(CHAIN_ID),
    )


async def test_a_leader_cut_from_its_lock_stops_and_the_standby_leads(
    database: tuple[str, str], devnet: Devnet, eth: EthClient
) -> None:
    url, name = database
    chain = await funded_chain(devnet, eth)
    stop = asyncio.Event()
    first_leads, second_leads = asyncio.Event(), asyncio.Event()
    first = asyncio.create_task(run_leader(url, CHAIN_ID, chain, stop, on_leading=first_leads.set))
    await asyncio.wait_for(first_leads.wait(), 30)
    second = asyncio.create_task(
        run_leader(url, CHAIN_ID, chain, stop, on_leading=second_leads.set)
    )
    try:
        await asyncio.sleep(2.5)  # two of the standby's tries
        assert not second_leads.is_set()

        admin = await asyncpg.connect(ADMIN_URL)
        try:
            cut = await admin.fetchval(
                "SELECT count(pg_terminate_backend(l.pid)) FROM pg_locks l "
                "JOIN pg_database d ON d.oid = l.database "
                "WHERE l.locktype = 'advisory' AND l.granted AND d.datname = $1",
                name,
            )
        finally:
            await admin.close()
        assert cut == 1
        with pytest.raises(LeadershipLostError):
            await asyncio.wait_for(first, 10)
        await asyncio.wait_for(second_leads.wait(), 10)
    finally:
        stop.set()
        await asyncio.wait_for(asyncio.gather(first, second, return_exceptions=True), 30)
