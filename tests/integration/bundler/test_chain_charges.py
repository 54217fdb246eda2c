"""Billing follows the chain, on a real anvil: an op our paymaster signed for a project is
charged to that project when its UserOperationEvent appears, whoever submitted it — a
`handleOps` sent straight to the EntryPoint by a stranger, our bundler, or both at once — and
whether its execution succeeded or reverted. A hold is released unsent only once the chain,
read past its final block, shows the signature expired unmined."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from entryway.bundler.port import Receipt
from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.rpc_types import user_operation_json
from entryway.chain.rpc import EthClient
from entryway.chain.transactor import Transactor
from entryway.composition.root import paymaster_event_follower
from entryway.devnet.devnet import Devnet
from entryway.domain.plans import PlanName
from entryway.domain.signatures import sign_digest
from entryway.domain.userop import UserOperation, user_op_hash
from entryway.paymaster.calls import encode_execute
from entryway.paymaster.chain_charges import PaymasterEventFollower
from entryway.paymaster.erc7677 import PaymasterChain, PaymasterRpc, PaymasterSettings
from entryway.paymaster.ports import EventCursor
from entryway.paymaster.settlement import (
    SETTLE_TASK,
    SettleHandler,
    SponsoredOp,
    SponsorshipSettler,
)
from entryway.paymaster.signer import PaymasterSigner
from entryway.service.app import create_app
from entryway.service.services import ChainRuntime, Services
from entryway.service.wallet_wiring import bundler_port
from entryway.storage.engine import make_engine, migrate, sqlite_url
from entryway.storage.ledger import UsageStatus
from entryway.storage.policies import PolicyStore, SqlSponsorshipUsage
from entryway.storage.store import Store
from entryway.storage.tasks import TaskQueue
from tests.integration.bundler.test_service_chain_routes import rpc, tenant
from tests.integration.harness import COUNTER, ETHER, Harness
from tests.integration.test_erc7677 import deploy_counter, with_fields

CHAIN = 80002
START = datetime(2026, 1, 1, tzinfo=UTC)
VALIDITY_S = 120


@dataclass
class Rig:
    client: httpx.AsyncClient
    services: Services
    settler: SponsorshipSettler
    follower: PaymasterEventFollower
    announced: list[tuple[SponsoredOp, Receipt]]

    @property
    def store(self) -> Store:
        return self.services.store

    async def signed_op(
        self, harness: Harness, key: str, call_data: bytes = b""
    ) -> tuple[UserOperation, str]:
        """A fresh account's op, sponsored through pm_getPaymasterData and signed by its
        owner: what a tenant holds before (not) calling eth_sendUserOperation."""
        owner = harness.new_key()
        draft = await harness.build_op(owner.address, call_data)
        raw = user_operation_json(draft)
        del raw["signature"]
        ep = harness.deployment.entry_point
        r = await self.client.post(
            f"/rpc/{CHAIN}",
            headers={"Authorization": f"Bearer {key}"},
            json=rpc("pm_getPaymasterData", raw, ep, hex(CHAIN), {}),
        )
        assert "result" in r.json(), r.text
        op = with_fields(draft, r.json()["result"])
        digest = user_op_hash(op, ep, CHAIN)
        return op.with_signature(sign_digest(bytes(owner.key), digest)), "0x" + digest.hex()

    async def sponsorships(self, project_id: str) -> list[Any]:
        return [
            e
            async for e in self.services.platform.usage.events(
                project_id, START, datetime.now(UTC) + timedelta(1)
            )
            if e.operation == "sponsored_user_operation"
        ]

    async def follow_all(self) -> int:
        charged = 0
        while True:
            done = await self.follower.step()
            charged += done
            cursor = await self.store.signatures.cursor(CHAIN)
            head = await self.follower.eth.block_number()
            if cursor is not None and cursor.next_block > head:
                return charged


@pytest.fixture
async def rig(
    tmp_path: Path, devnet: Devnet, eth: EthClient, bundler_rpc: BundlerRpc
) -> AsyncIterator[Rig]:
    # A fresh block first: the paymaster's signatures run from the latest block's time, and
    # earlier tests sharing this devnet may have moved its clock days ahead of this host's,
    # then left it idle (it mines on transactions only) for longer than VALIDITY_S.
    await eth.rpc.request("evm_mine", [])
    engine = make_engine(sqlite_url(tmp_path))
    await migrate(engine)
    services = Services()
    services.attach(Store(engine, auth_cache_seconds=0))
    deployment = devnet.chains[0].deployment
    runtime = ChainRuntime(CHAIN, "", deployment, bundler_rpc, eth)
    services.chains[CHAIN] = runtime
    store = services.store
    services.paymaster = PaymasterRpc(
        {CHAIN: PaymasterChain.on(eth, CHAIN, deployment.entry_point, deployment.paymaster)},
        PaymasterSigner(devnet.keys.paymaster_signer),
        PolicyStore(store.engine),
        SqlSponsorshipUsage(store.engine),
        store.ledger,
        services.prices,
        settings=PaymasterSettings(validity_s=VALIDITY_S),
        signatures=store.signatures,
    )
    announced: list[tuple[SponsoredOp, Receipt]] = []

    async def settled(op: SponsoredOp, receipt: Receipt) -> None:
        announced.append((op, receipt))

    settler = SponsorshipSettler(
        store.ledger,
        services.prices,
        {CHAIN: bundler_port(runtime)},
        inclusions=store.ledger,
        signatures=store.signatures,
        on_settled=settled,
        unsent_after=timedelta(0),
    )
    services.settler = settler
    # Read from the current head: earlier tests' blocks are not this project's.
    follower = paymaster_event_follower(services, store, runtime, settler, finality_depth=2)
    follower.start_lookback = 0
    transport = httpx.ASGITransport(app=create_app(services), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://svc.test") as client:
        yield Rig(client, services, settler, follower, announced)
    await engine.dispose()


async def stranger(harness: Harness) -> Harness:
    """Someone with no part in the service: a fresh EOA that sends handleOps itself."""
    key = harness.new_key()
    await harness.fund(key.address, 10 * ETHER)
    executor = Transactor(harness.eth, key, harness.chain_id)
    return Harness(
        harness.eth,
        harness.chain_id,
        harness.deployment,
        harness.paymaster_signer,
        harness.operator,
        executor,
    )


async def test_an_op_sent_straight_to_the_entry_point_is_charged_once_to_its_project(
    rig: Rig, harness: Harness
) -> None:
    pid, key = await tenant(rig.services, PlanName.FREE, [CHAIN])
    auth = {"Authorization": f"Bearer {key}"}
    await rig.follow_all()  # the cursor starts at today's head
    op, op_hash = await rig.signed_op(harness, key)
    (hold,) = await rig.sponsorships(pid)
    assert hold.status == UsageStatus.HELD

    bundle = await (await stranger(harness)).handle_ops([op])
    (outcome,) = bundle.outcomes
    assert outcome.success and outcome.paymaster == harness.deployment.paymaster

    assert await rig.follow_all() == 1
    (charged,) = await rig.sponsorships(pid)
    assert charged.status == UsageStatus.SETTLED and charged.credits > 0
    expected = rig.services.prices.gas_credits(CHAIN, outcome.actual_gas_cost)
    assert charged.credits >= expected  # the gas paid, plus the sponsorship's service fees
    announced, receipt = rig.announced[-1]
    assert (announced.project_id, announced.user_op_hash) == (pid, op_hash)
    assert announced.submitted_by == "external"
    assert receipt.actual_gas_cost == outcome.actual_gas_cost

    r = await rig.client.get(
        "/op-status", params={"chainId": CHAIN, "userOpHash": op_hash}, headers=auth
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "included" and body["submittedBy"] == "external"
    assert body["credits"] == charged.credits
    status = await rig.client.post(
        f"/rpc/{CHAIN}", headers=auth, json=rpc("entryway_getUserOperationStatus", op_hash)
    )
    assert status.json()["result"]["submittedBy"] == "external"

    # Read again (another replica, a restart from an older cursor): still charged once.
    await rig.store.signatures.save_cursor(
        CHAIN,
        EventCursor(bundle.receipt.block_number, -1, 0),
    )
    await rig.follow_all()
    assert [e.credits for e in await rig.sponsorships(pid)] == [charged.credits]
    # Another project sees nothing of it.
    _, other = await tenant(rig.services, PlanName.FREE, [CHAIN])
    r = await rig.client.get(
        "/op-status",
        params={"chainId": CHAIN, "userOpHash": op_hash},
        headers={"Authorization": f"Bearer {other}"},
    )
    assert r.status_code == 404


async def test_an_op_sent_both_ways_is_charged_once(
    rig: Rig, harness: Harness, bundler_rpc: BundlerRpc
) -> None:
    pid, key = await tenant(rig.services, PlanName.FREE, [CHAIN])
    auth = {"Authorization": f"Bearer {key}"}
    await rig.follow_all()
    op, op_hash = await rig.signed_op(harness, key)
    ep = harness.deployment.entry_point
    sent = await rig.client.post(
        f"/rpc/{CHAIN}",
        headers=auth,
        json=rpc("eth_sendUserOperation", user_operation_json(op), ep),
    )
    assert sent.json().get("result") == op_hash, sent.json()
    # Before our bundler bundles it, the same signed op goes straight to the EntryPoint.
    bundle = await (await stranger(harness)).handle_ops([op])
    assert bundle.outcomes[0].success
    await bundler_rpc.dispatch(rpc("debug_bundler_sendBundleNow"))  # ours fails: nonce used

    assert await rig.follow_all() == 1
    later = TaskQueue(rig.store.engine, clock=lambda: datetime.now(UTC) + timedelta(1))
    (task,) = await later.claim("test", [SETTLE_TASK], lease_seconds=30)
    assert await SettleHandler(rig.settler)(task) == {"settled": op_hash}

    (charged,) = await rig.sponsorships(pid)
    assert charged.status == UsageStatus.SETTLED
    assert charged.credits >= rig.services.prices.gas_credits(
        CHAIN, bundle.outcomes[0].actual_gas_cost
    )
    r = await rig.client.get(
        "/op-status", params={"chainId": CHAIN, "userOpHash": op_hash}, headers=auth
    )
    assert r.json()["submittedBy"] == "entryway"  # it was sent through the service too
    assert r.json()["credits"] == charged.credits  # the relay of a sponsored op is free


async def test_a_sponsored_op_whose_execution_reverted_is_charged(
    rig: Rig, harness: Harness
) -> None:
    pid, key = await tenant(rig.services, PlanName.FREE, [CHAIN])
    await rig.follow_all()
    counter = await deploy_counter(harness)
    failing = encode_execute(counter, 0, COUNTER.encode_call("fail", "no"))
    op, op_hash = await rig.signed_op(harness, key, failing)
    bundle = await (await stranger(harness)).handle_ops([op])
    (outcome,) = bundle.outcomes
    assert not outcome.success and outcome.actual_gas_cost > 0

    assert await rig.follow_all() == 1
    (charged,) = await rig.sponsorships(pid)
    assert charged.status == UsageStatus.SETTLED
    assert charged.credits >= rig.services.prices.gas_credits(CHAIN, outcome.actual_gas_cost)
    announced, receipt = rig.announced[-1]
    assert announced.user_op_hash == op_hash and not receipt.success


async def test_a_hold_is_released_only_once_the_chain_shows_its_signature_dead(
    rig: Rig, harness: Harness
) -> None:
    pid, key = await tenant(rig.services, PlanName.FREE, [CHAIN])
    await rig.follow_all()
    op, _ = await rig.signed_op(harness, key)
    (hold,) = await rig.sponsorships(pid)
    balance = await rig.store.credit_account(pid)
    before = balance.balance(datetime.now(UTC))

    # The hold is old enough by the clock, but the signature can still be mined: kept.
    await rig.follow_all()
    assert await rig.settler.sweep() == 0
    # The chain moves past validUntil (plus the grace) and that block becomes final; the
    # devnet is put back afterwards (its clock too), for the tests that share it.
    snapshot = await harness.eth.rpc.request("evm_snapshot", [])
    try:
        await harness.advance_time(VALIDITY_S + 200)
        for _ in range(3):
            await harness.eth.rpc.request("evm_mine", [])
        assert await rig.settler.sweep() == 0  # not read yet: the chain has not said so
        await rig.follow_all()
        assert await rig.settler.sweep() == 1
        (released,) = await rig.sponsorships(pid)
        assert released.status == UsageStatus.RELEASED
        after = (await rig.store.credit_account(pid)).balance(datetime.now(UTC))
        assert after == before + hold.credits
        # Too late for the chain as well: the EntryPoint refuses the expired signature.
        error = await harness.handle_ops_error([op])
        assert error.args[1].startswith("AA32"), error
    finally:
        assert await harness.eth.rpc.request("evm_revert", [snapshot]) is True


async def test_a_released_hold_whose_op_is_mined_after_all_is_charged(
    rig: Rig, harness: Harness
) -> None:
    """Our bundler dropped the op and its hold was given back, but the signed op was still
    valid and someone mined it: the chain's event charges it."""
    pid, key = await tenant(rig.services, PlanName.FREE, [CHAIN])
    await rig.follow_all()
    op, _ = await rig.signed_op(harness, key)
    (hold,) = await rig.sponsorships(pid)
    await rig.store.ledger.release(pid, hold.idempotency_key, datetime.now(UTC))
    bundle = await (await stranger(harness)).handle_ops([op])
    assert await rig.follow_all() == 1
    events = await rig.sponsorships(pid)
    assert sorted(e.status for e in events) == [UsageStatus.RELEASED, UsageStatus.SETTLED]
    late = next(e for e in events if e.status == UsageStatus.SETTLED)
    assert late.credits >= rig.services.prices.gas_credits(
        CHAIN, bundle.outcomes[0].actual_gas_cost
    )
    await rig.store.signatures.save_cursor(
        CHAIN,
        EventCursor(bundle.receipt.block_number, -1, 0),
    )
    await rig.follow_all()
    assert len(await rig.sponsorships(pid)) == 2  # read again: charged once
