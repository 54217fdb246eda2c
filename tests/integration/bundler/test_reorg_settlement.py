"""Real reorgs on anvil (evm_snapshot / evm_revert and new blocks) of the block a settled
sponsored op was mined in: the chain's follower sees the block go, the settlement is
reversed by an explicit ledger entry and announced, and the op is either mined again (sent
back to the mempool while still valid) and settled again, or reported dropped with nothing
charged for its gas. Throughout, the usage events add up exactly to the ledger's lots and
overage."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
from sqlalchemy import func, select

from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.rpc_types import user_operation_json
from entryway.chain.finality import Finality
from entryway.chain.follower import BlockRef
from entryway.chain.following import ChainFollower
from entryway.chain.rpc import EthClient
from entryway.domain.plans import PlanName
from entryway.domain.signatures import sign_digest
from entryway.domain.tasks import RetryTaskError, Task
from entryway.domain.userop import user_op_hash
from entryway.paymaster.inclusions import Reversal
from entryway.paymaster.reorgs import SponsorshipReorgs
from entryway.paymaster.settlement import (
    SETTLE_TASK,
    SettleHandler,
    SponsoredOp,
    SponsorshipSettler,
)
from entryway.service.services import Services
from entryway.service.wallet_wiring import bundler_port
from entryway.storage.ledger import UsageStatus
from entryway.storage.schema import credit_lots, usage_draws, usage_events
from entryway.storage.tasks import TaskQueue
from tests.integration.bundler.test_service_chain_routes import CHAIN, rpc, service, tenant
from tests.integration.harness import Harness
from tests.integration.test_erc7677 import with_fields

__all__ = ["service"]


class Rig:
    def __init__(self, client: httpx.AsyncClient, services: Services, eth: EthClient) -> None:
        self.client, self.services, self.eth = client, services, eth
        self.reorged: list[Reversal] = []
        self.dropped: list[tuple[SponsoredOp, str]] = []
        self.clock_offset = 0.0
        store = services.store
        self.reorgs = SponsorshipReorgs(store.ledger, TaskQueue(store.engine), self._reorged)
        self.settler = SponsorshipSettler(
            store.ledger,
            services.prices,
            {CHAIN: bundler_port(services.chains[CHAIN])},
            inclusions=store.ledger,
            on_dropped=self._dropped,
            clock=lambda: datetime.now(UTC).timestamp() + self.clock_offset,
        )
        self.follower = ChainFollower(
            eth, CHAIN, Finality(2, 16), on_removed=self._removed, on_head=self._head
        )

    async def _reorged(self, reversal: Reversal) -> None:
        self.reorged.append(reversal)

    async def _dropped(self, op: SponsoredOp, reason: str) -> None:
        self.dropped.append((op, reason))

    async def _removed(self, chain_id: int, blocks: list[BlockRef]) -> None:
        await self.reorgs.removed(chain_id, [b.number for b in blocks])

    async def _head(self, chain_id: int, head: BlockRef, finality: Finality) -> None:
        await self.services.store.ledger.finalize(chain_id, finality.final_up_to(head.number))

    async def settle_tasks(self) -> list[Task]:
        later = TaskQueue(
            self.services.store.engine, clock=lambda: datetime.now(UTC) + timedelta(1)
        )
        return await later.claim("test", [SETTLE_TASK], lease_seconds=30, limit=10)


async def send_sponsored(client: httpx.AsyncClient, harness: Harness, auth: dict[str, str]) -> str:
    ep = harness.deployment.entry_point
    owner = harness.new_key()
    draft = await harness.build_op(owner.address, b"")
    raw = user_operation_json(draft)
    del raw["signature"]
    r = await client.post(
        f"/rpc/{CHAIN}", headers=auth, json=rpc("pm_getPaymasterData", raw, ep, hex(CHAIN), {})
    )
    op = with_fields(draft, r.json()["result"])
    op = op.with_signature(sign_digest(bytes(owner.key), user_op_hash(op, ep, CHAIN)))
    send = rpc("eth_sendUserOperation", user_operation_json(op), ep)
    r = await client.post(f"/rpc/{CHAIN}", headers=auth, json=send)
    return str(r.json()["result"])


async def books(services: Services, pid: str) -> dict[str, int]:
    engine = services.store.engine
    total = func.coalesce(func.sum(usage_events.c.credits), 0)
    async with engine.connect() as db:
        events = await db.scalar(select(total).where(usage_events.c.project_id == pid))
        overage = await db.scalar(
            select(func.coalesce(func.sum(usage_events.c.overage), 0)).where(
                usage_events.c.project_id == pid
            )
        )
        draws = await db.scalar(
            select(func.coalesce(func.sum(usage_draws.c.credits), 0))
            .select_from(usage_draws.join(usage_events))
            .where(usage_events.c.project_id == pid)
        )
        drawn = credit_lots.c.amount - credit_lots.c.remaining
        lots = await db.scalar(
            select(func.coalesce(func.sum(drawn), 0)).where(credit_lots.c.project_id == pid)
        )
    figures = {"events": events, "draws": draws, "lots": lots, "overage": overage}
    return {name: int(value or 0) for name, value in figures.items()}


def balanced(figures: dict[str, int]) -> bool:
    """The usage events add up exactly to what left the lots plus the overage."""
    return (
        figures["events"]
        == figures["lots"] + figures["overage"]
        == (figures["draws"] + figures["overage"])
    )


async def statuses(services: Services, pid: str) -> list[tuple[str, int]]:
    async with services.store.engine.connect() as db:
        rows = await db.execute(
            select(usage_events.c.status, usage_events.c.credits)
            .where(
                usage_events.c.project_id == pid,
                usage_events.c.operation == "sponsored_user_operation",
            )
            .order_by(usage_events.c.created_at)
        )
        return [(r.status, int(r.credits)) for r in rows]


async def mined_then_reorged(
    rig: Rig, harness: Harness, bundler_rpc: BundlerRpc, pid: str, key: str
) -> tuple[str, int, Task]:
    """A sponsored op sent, mined and settled, then its block removed by a reorg; returns
    its hash, its settled credits and the settlement task queued again."""
    auth = {"Authorization": f"Bearer {key}"}
    await rig.follower.step()
    op_hash = await send_sponsored(rig.client, harness, auth)
    snapshot = await rig.eth.rpc.request("evm_snapshot")
    await bundler_rpc.dispatch(rpc("debug_bundler_sendBundleNow"))
    (task,) = await rig.settle_tasks()
    assert await SettleHandler(rig.settler)(task) == {"settled": op_hash}
    [(status, settled)] = await statuses(rig.services, pid)
    assert status == UsageStatus.SETTLED and settled > 0
    receipt = await rig.services.chains[CHAIN].rpc.get_user_operation_receipt([op_hash])
    assert receipt is not None
    block = int(receipt["receipt"]["blockNumber"], 16)
    await rig.follower.step()
    assert balanced(await books(rig.services, pid))

    assert await rig.eth.rpc.request("evm_revert", [snapshot]) is True
    await rig.eth.rpc.request("anvil_mine", ["0x2"])
    removed = await rig.follower.step()
    assert block in [b.number for b in removed]
    [reversal] = rig.reorged
    assert (reversal.user_op_hash, reversal.credits, reversal.block_number) == (
        op_hash,
        settled,
        block,
    )
    assert await statuses(rig.services, pid) == [
        (UsageStatus.SETTLED, settled),  # the settlement itself is never edited
        (UsageStatus.REVERSED, -settled),
    ]
    assert balanced(await books(rig.services, pid))
    (again,) = await rig.settle_tasks()
    assert again.payload["userOpHash"] == op_hash and again.payload["reorged"] == 1
    return op_hash, settled, again


async def test_a_reorged_op_still_valid_is_mined_again_and_settled_again(
    service: tuple[httpx.AsyncClient, Services],
    harness: Harness,
    bundler_rpc: BundlerRpc,
    eth: EthClient,
) -> None:
    client, services = service
    rig = Rig(client, services, eth)
    pid, key = await tenant(services, PlanName.FREE, [CHAIN])
    op_hash, settled, again = await mined_then_reorged(rig, harness, bundler_rpc, pid, key)
    auth = {"Authorization": f"Bearer {key}"}
    status: dict[str, str | int] = {"chainId": CHAIN, "userOpHash": op_hash}
    handler = SettleHandler(rig.settler)
    try:
        await handler(again)
        raise AssertionError("the op was settled while no block had it")
    except RetryTaskError:
        pass  # sent back to the mempool
    r = await client.get("/op-status", params=status, headers=auth)
    assert r.json()["status"] == "pending"
    await bundler_rpc.dispatch(rpc("debug_bundler_sendBundleNow"))
    assert await handler(again) == {"settled": op_hash}
    history = await statuses(services, pid)
    assert history[:2] == [(UsageStatus.SETTLED, settled), (UsageStatus.REVERSED, -settled)]
    assert history[2][0] == UsageStatus.SETTLED and history[2][1] > 0
    figures = await books(services, pid)
    assert balanced(figures)
    relay = figures["events"] - history[2][1]
    credits, final = await services.store.ledger.credits_for(pid, op_hash)
    assert (credits, final) == (relay + history[2][1], False)  # mined, not yet deep enough
    await eth.rpc.request("anvil_mine", ["0x2"])
    await rig.follower.step()
    assert await services.store.ledger.credits_for(pid, op_hash) == (credits, True)
    assert rig.dropped == []


async def test_a_reorged_op_no_longer_valid_is_dropped_and_its_gas_charge_stays_reversed(
    service: tuple[httpx.AsyncClient, Services],
    harness: Harness,
    bundler_rpc: BundlerRpc,
    eth: EthClient,
) -> None:
    client, services = service
    rig = Rig(client, services, eth)
    pid, key = await tenant(services, PlanName.FREE, [CHAIN])
    op_hash, settled, again = await mined_then_reorged(rig, harness, bundler_rpc, pid, key)
    # On the new chain its sender already has code, so the op no longer validates: the
    # bundler that mined it does not take it back, and neither does the settler.
    await eth.rpc.request("anvil_setCode", [again.payload["op"]["sender"], "0x00"])
    assert await SettleHandler(rig.settler)(again) == {"settled": op_hash}  # done with it
    [(dropped, reason)] = rig.dropped
    assert dropped.user_op_hash == op_hash and "left the chain" in reason
    figures = await books(services, pid)
    assert balanced(figures)
    assert await statuses(services, pid) == [
        (UsageStatus.SETTLED, settled),
        (UsageStatus.REVERSED, -settled),
    ]
    credits, final = await services.store.ledger.credits_for(pid, op_hash)
    assert credits == figures["events"] and final  # the relay alone: no gas charged
    r = await client.get(
        "/op-status",
        params={"chainId": CHAIN, "userOpHash": op_hash},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert r.json()["status"] == "dropped"
