"""Smart wallets on the session's anvil: a bundler in auto mode (ops are mined without being
asked), the service's API over SQLite with its paymaster and the wallet routes, and helpers to
deploy a guarded account and to read what was charged. Store tests also get the storage tier's
`engine` (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from eth_account.signers.local import LocalAccount
from sqlalchemy import select

from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.standalone import StandaloneSettings, build_bundler
from entryway.bundler.states import BundlingMode
from entryway.chain.rpc import EthClient
from entryway.devnet.devnet import Devnet
from entryway.domain.apikeys import KeyEnvironment
from entryway.domain.plans import PlanName
from entryway.domain.userop import UserOperation
from entryway.paymaster.calls import encode_execute_batch
from entryway.paymaster.erc7677 import PaymasterChain, PaymasterRpc
from entryway.paymaster.signer import PaymasterSigner
from entryway.service.app import create_app
from entryway.service.routes_wallets import wallet_routes
from entryway.service.services import ChainRuntime, Services
from entryway.storage.engine import make_engine, migrate, sqlite_url
from entryway.storage.policies import PolicyStore, SqlSponsorshipUsage
from entryway.storage.schema import usage_events
from entryway.storage.store import Store
from tests.integration.conftest import CHAIN_ID
from tests.integration.harness import ACCOUNT, ETHER, Harness
from tests.integration.storage.conftest import engine

__all__ = ["engine"]


@pytest.fixture(scope="session")
async def auto_bundler(devnet: Devnet, eth: EthClient) -> AsyncIterator[BundlerRpc]:
    executor = Harness.new_key()
    await eth.rpc.request("anvil_setBalance", [executor.address, hex(1000 * ETHER)])
    chain = devnet.chains[0]
    settings = StandaloneSettings(
        rpc_url=chain.rpc_url,
        entry_point=chain.deployment.entry_point,
        executor_keys=(executor,),
        mode=BundlingMode.AUTO,
        auto_bundle_interval_s=0.1,
    )
    rpc = await build_bundler(eth, settings)
    await rpc.bundler.start()
    yield rpc
    await rpc.bundler.stop()


@dataclass
class Service:
    client: httpx.AsyncClient
    services: Services

    async def tenant(self) -> tuple[str, dict[str, str]]:
        """A FREE project on the devnet chain (1M credits) and its key's auth header."""
        now = datetime.now(UTC)
        store = self.services.store
        owner = await store.create_user(f"{now.timestamp()}@example.org", now)
        pid = await store.create_project(owner, "wallets", PlanName.FREE, [CHAIN_ID], now)
        key = await store.issue_key(pid, KeyEnvironment.TEST, [CHAIN_ID], now)
        return pid, {"Authorization": f"Bearer {key.secret}"}

    async def charges(self, project_id: str) -> list[dict[str, Any]]:
        """The project's usage events, oldest first, with their breakdowns."""
        async with self.services.store.engine.connect() as db:
            rows = await db.execute(
                select(usage_events)
                .where(usage_events.c.project_id == project_id)
                .order_by(usage_events.c.created_at)
            )
            return [
                {**r._mapping, "breakdown": json.loads(r.breakdown) if r.breakdown else {}}
                for r in rows
            ]


@pytest.fixture
async def service(
    tmp_path: Path, devnet: Devnet, eth: EthClient, auto_bundler: BundlerRpc
) -> AsyncIterator[Service]:
    db = make_engine(sqlite_url(tmp_path))
    await migrate(db)
    services = Services()
    services.attach(Store(db, auth_cache_seconds=0))
    deployment = devnet.chains[0].deployment
    services.chains[CHAIN_ID] = ChainRuntime(CHAIN_ID, "", deployment, auto_bundler, eth)
    store = services.store
    services.paymaster = PaymasterRpc(
        {CHAIN_ID: PaymasterChain.on(eth, CHAIN_ID, deployment.entry_point, deployment.paymaster)},
        PaymasterSigner(devnet.keys.paymaster_signer),
        PolicyStore(store.engine),
        SqlSponsorshipUsage(store.engine),
        store.ledger,
        services.prices,
    )
    app = create_app(services)
    if not any(getattr(r, "path", "") == "/v1/recoveries" for r in app.routes):
        app.include_router(wallet_routes())  # until the composition root includes it
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://svc.test") as client:
        yield Service(client, services)
    await db.dispose()


@dataclass(frozen=True)
class Wallet:
    owner: LocalAccount
    address: str


def guard_calls(account: str, guardians: list[LocalAccount], threshold: int) -> bytes:
    """executeBatch: the account adds its guardians and sets the threshold, calling itself."""
    calls = [(account, 0, ACCOUNT.encode_call("addGuardian", g.address)) for g in guardians]
    calls.append((account, 0, ACCOUNT.encode_call("setGuardianThreshold", threshold)))
    return encode_execute_batch(calls)


async def guarded_op(
    h: Harness, owner: LocalAccount, guardians: list[LocalAccount], threshold: int
) -> UserOperation:
    """The first op of a new account: its deployment (initCode) and its guardians, unsigned."""
    address = await h.account_address(owner.address)
    return await h.build_op(owner.address, guard_calls(address, guardians, threshold))


async def guarded_wallet(h: Harness, guardians: list[LocalAccount], threshold: int) -> Wallet:
    owner = h.new_key()
    op = h.sign(h.sponsor(await guarded_op(h, owner, guardians, threshold)), owner)
    assert (await h.handle_ops([op])).outcomes[0].success
    return Wallet(owner, op.sender)


async def receipt_of(bundler: BundlerRpc, op_hash: str, within: float = 20.0) -> dict[str, Any]:
    """The op's receipt, once the auto bundler has mined it."""
    async with asyncio.timeout(within):
        while (receipt := await bundler.get_user_operation_receipt([op_hash])) is None:  # noqa: ASYNC110 - polling the chain
            await asyncio.sleep(0.1)
    return receipt
