"""Reversals in a real database (SQLite and PostgreSQL): a settlement whose op's block a
reorg removed is given back by an explicit entry, the settlement itself untouched; the
usage events still add up exactly to what left the lots plus the overage; an op mined again
settles again; a settlement is final only once its block is deep enough."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.plans import PlanName
from entryway.domain.pricebook import OperationType, Quote
from entryway.paymaster.inclusions import Inclusion
from entryway.storage.ledger import UsageContext, UsageStatus
from entryway.storage.schema import credit_lots, projects, usage_draws, usage_events
from entryway.storage.store import Store

NOW = datetime(2026, 11, 21, 12, tzinfo=UTC)
CHAIN = 80002
OP = "0x" + "ab" * 32


def sponsored(credits: int) -> Quote:
    return Quote.of(OperationType.SPONSORED_USER_OPERATION, relay=credits)


async def project(store: Store, grant: int) -> str:
    owner = await store.create_user(f"{id(store)}-{asyncio.get_running_loop().time()}@x.org", NOW)
    return await store.create_project(owner, "p", PlanName.STARTER, [CHAIN], NOW, grant=grant)


async def books(engine: AsyncEngine, pid: str) -> tuple[int, int, int, int]:
    """(credits of the usage events, drawn from the lots by the draws, drawn from the lots
    by their remaining amounts, overage of the events)."""
    async with engine.connect() as db:
        events = await db.scalar(
            select(func.coalesce(func.sum(usage_events.c.credits), 0)).where(
                usage_events.c.project_id == pid
            )
        )
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
        lots = await db.scalar(
            select(
                func.coalesce(func.sum(credit_lots.c.amount - credit_lots.c.remaining), 0)
            ).where(credit_lots.c.project_id == pid)
        )
    return int(events or 0), int(draws or 0), int(lots or 0), int(overage or 0)


async def cycle_overage(engine: AsyncEngine, pid: str) -> int:
    async with engine.connect() as db:
        value = await db.scalar(
            select(projects.c.cycle_overage).where(projects.c.project_id == pid)
        )
    return int(value or 0)


async def settled_op(store: Store, pid: str, held: int, actual: int, block: int) -> str:
    key = f"sponsor:{CHAIN}:0x{block:064x}"
    await store.ledger.hold(pid, key, sponsored(held), NOW, chain_id=CHAIN)
    await store.ledger.link(pid, key, OP)
    await store.ledger.record_usage(
        pid, f"relay:{block}", "relayed_user_operation", 7, NOW,
        UsageContext(chain_id=CHAIN, reference=OP),
    )  # fmt: skip
    inclusion = Inclusion(CHAIN, OP, block, "0x" + "cd" * 32)
    await store.ledger.settle_included(pid, key, sponsored(actual), NOW, inclusion)
    return key


async def test_a_reorg_reverses_the_settlement_by_an_entry_and_the_books_still_balance(
    engine: AsyncEngine,
) -> None:
    store = Store(engine)
    pid = await project(store, grant=1_000)
    # The hold and the relay take 907 of the lot; settling dearer takes its last 93 and
    # 207 of overage.
    key = await settled_op(store, pid, held=900, actual=1_200, block=17)
    balance_before = (await store.credit_account(pid)).balance(NOW)
    assert balance_before == 0 and await cycle_overage(engine, pid) == 207
    assert await store.ledger.credits_for(pid, OP) == (1_207, False)  # block not deep yet

    (reversal,) = await store.ledger.reverse_in_blocks(CHAIN, [17, 18], NOW)
    assert (reversal.credits, reversal.block_number, reversal.reversals) == (1_200, 17, 1)
    events, draws, lots, overage = await books(engine, pid)
    assert events == draws + overage and draws == lots
    assert events == 7  # only the relay stands
    assert await cycle_overage(engine, pid) == overage == 0  # the relay came from the lot
    assert (await store.credit_account(pid)).balance(NOW) == 1_000 - lots
    async with engine.connect() as db:
        rows = {
            r.idempotency_key: r
            for r in await db.execute(select(usage_events).where(usage_events.c.project_id == pid))
        }
    settlement = rows[key]
    assert (settlement.status, settlement.credits) == (UsageStatus.SETTLED, 1_200)  # untouched
    entry = rows[f"reversal:{settlement.event_id}"]
    assert (entry.status, entry.credits, entry.overage) == (UsageStatus.REVERSED, -1_200, -207)
    assert await store.ledger.credits_for(pid, OP) == (7, True)

    # The same removal seen again (another process's follower) reverses nothing more.
    assert await store.ledger.reverse_in_blocks(CHAIN, [17], NOW) == []
    assert await books(engine, pid) == (events, draws, lots, overage)


async def test_an_op_mined_again_settles_again_and_its_credits_become_final_when_deep(
    engine: AsyncEngine,
) -> None:
    store = Store(engine)
    pid = await project(store, grant=10_000)
    key = await settled_op(store, pid, held=900, actual=600, block=17)
    await store.ledger.reverse_in_blocks(CHAIN, [17], NOW)
    again = Inclusion(CHAIN, OP, 19, "0x" + "ef" * 32)
    record = await store.ledger.settle_included(pid, key, sponsored(650), NOW, again)
    assert (record.credits, record.duplicate) == (650, False)
    duplicate = await store.ledger.settle_included(pid, key, sponsored(650), NOW, again)
    assert duplicate.duplicate
    assert await store.ledger.credits_for(pid, OP) == (657, False)
    assert await store.ledger.finalize(CHAIN, 18) == 0  # block 19 is not that deep
    assert await store.ledger.credits_for(pid, OP) == (657, False)
    assert await store.ledger.finalize(CHAIN, 19) == 1
    assert await store.ledger.credits_for(pid, OP) == (657, True)
    events, draws, lots, overage = await books(engine, pid)
    assert events == draws + overage == 657 and draws == lots
    assert (await store.credit_account(pid)).balance(NOW) == 10_000 - 657
