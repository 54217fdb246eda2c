"""Settlements and the blocks they were mined in: reversed when a reorg removes the block,
final once it is deep enough.

A sponsorship settles on its op's receipt (`settle_included`), and the receipt's block is
recorded with it (`op_inclusions`). When a reorg removes that block (`reverse_in_blocks`),
the settlement is given back by an explicit reversal entry: a usage event of status
`reversed`, key `reversal:{event_id}`, with the settlement's credits, overage and lot draws
negated; the settlement itself is never edited. The lots get their credits back, the
project's cycle overage its overage (never under zero: a cycle closed since billed it), so
the usage events still add up exactly to what left the lots plus the overage.

If the op is mined again, it settles again on its new receipt: a fresh settled event, key
`{hold key}#{n}` (n: the settlements before it), recorded with its block in turn. If it is
not, the reversal stands and the sponsorship costs nothing.

Once the chain's head is `finality depth` blocks past an inclusion (`finalize`), it is
final: `credits_for` reports an op's credits final only when no hold waits and every
settlement standing is final.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime

from sqlalchemy import func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from entryway.domain.pricebook import Quote
from entryway.paymaster.inclusions import Inclusion, Reversal
from entryway.storage import ledger_postings as postings
from entryway.storage.ledger_charges import charge_project
from entryway.storage.ledger_records import (
    Charge,
    LedgerError,
    UsageContext,
    UsageRecord,
    UsageStatus,
)
from entryway.storage.schema import (
    credit_lots,
    op_inclusions,
    projects,
    usage_draws,
    usage_events,
)

_i = op_inclusions


# Runs inside the reversal's transaction (e.g. queueing the op's settlement again).
FollowUp = Callable[[AsyncConnection, Reversal], Awaitable[None]]


async def settle_included(
    db: AsyncConnection,
    project_id: str,
    hold_key: str,
    actual: Quote,
    at: datetime,
    inclusion: Inclusion,
) -> UsageRecord:
    """Settle the hold on its op's receipt and record where the op was mined. A hold whose
    every settlement a reorg reversed, or that was released before its op was mined after
    all (sent around the service, or mined after it was reported dropped), is charged again
    as a fresh event; one whose settlement stands is left as it is (a duplicate)."""
    record = await postings.finish_hold(db, project_id, hold_key, actual, at)
    # A hold never sent through the service (its op went around it) gets the op's hash as
    # its reference here (a sent op's got it when sent), so its credits are found by it.
    await db.execute(
        update(usage_events)
        .where(
            usage_events.c.project_id == project_id,
            usage_events.c.idempotency_key == hold_key,
            usage_events.c.reference.is_(None),
        )
        .values(reference=inclusion.user_op_hash.lower())
    )
    if not record.duplicate:
        await _record_inclusion(db, record.event_id, project_id, hold_key, inclusion, at)
        return record
    earlier = (
        await db.execute(
            select(_i.c.event_id, _i.c.reversal_event_id).where(
                _i.c.project_id == project_id, _i.c.hold_key == hold_key
            )
        )
    ).all()
    standing = [r for r in earlier if r.reversal_event_id is None]
    if standing:
        if record.status is UsageStatus.SETTLED:
            return record
        charged = (
            await db.execute(
                select(usage_events.c.credits, usage_events.c.overage).where(
                    usage_events.c.event_id == standing[0].event_id
                )
            )
        ).one()
        return UsageRecord(
            standing[0].event_id,
            int(charged.credits),
            int(charged.overage or 0),
            True,
            UsageStatus.SETTLED,
        )
    if record.status is UsageStatus.SETTLED and not earlier:
        return record  # settled before inclusions were recorded
    hold = await postings.event(db, project_id, hold_key)
    charge = Charge(
        project_id,
        f"{hold_key}#{len(earlier)}",
        hold.operation,
        actual.credits,
        at,
        UsageContext(
            hold.key_id, hold.endpoint, hold.chain_id, hold.subject, hold.policy_id, hold.reference
        ),
        actual,
        UsageStatus.SETTLED,
    )
    (again,) = (await charge_project(db, project_id, [(0, charge)])).values()
    if not again.duplicate:
        await _record_inclusion(db, again.event_id, project_id, hold_key, inclusion, at)
    return again


async def _record_inclusion(
    db: AsyncConnection,
    event_id: str,
    project_id: str,
    hold_key: str,
    inclusion: Inclusion,
    at: datetime,
) -> None:
    await db.execute(
        insert(_i).values(
            event_id=event_id,
            project_id=project_id,
            chain_id=inclusion.chain_id,
            user_op_hash=inclusion.user_op_hash.lower(),
            hold_key=hold_key,
            block_number=inclusion.block_number,
            transaction_hash=inclusion.transaction_hash.lower(),
            created_at=at,
        )
    )


async def standing_in_blocks(
    db: AsyncConnection, chain_id: int, block_numbers: Sequence[int]
) -> list[str]:
    """The settlements (event ids) standing on ops mined in these blocks of the chain."""
    rows = await db.execute(
        select(_i.c.event_id)
        .where(
            _i.c.chain_id == chain_id,
            _i.c.block_number.in_(list(block_numbers)),
            _i.c.reversal_event_id.is_(None),
        )
        .order_by(_i.c.project_id, _i.c.event_id)
    )
    return [r.event_id for r in rows]


async def reverse(
    db: AsyncConnection,
    event_id: str,
    at: datetime,
    follow_up: FollowUp | None = None,
) -> Reversal | None:
    """Give back the settlement `event_id` whole by a reversal entry; None if it was
    reversed already."""
    inclusion = (await db.execute(select(_i).where(_i.c.event_id == event_id))).one_or_none()
    if inclusion is None:
        raise LedgerError(f"no recorded inclusion for event {event_id}")
    if inclusion.reversal_event_id is not None:
        return None
    await postings.lock_project(db, inclusion.project_id)
    settled = (
        await db.execute(select(usage_events).where(usage_events.c.event_id == event_id))
    ).one()
    reversal_id = str(uuid.uuid4())
    credits, overage = int(settled.credits), int(settled.overage)
    await db.execute(
        insert(usage_events).values(
            event_id=reversal_id,
            project_id=settled.project_id,
            idempotency_key=f"reversal:{event_id}",
            operation=settled.operation,
            credits=-credits,
            overage=-overage,
            created_at=at,
            key_id=settled.key_id,
            endpoint=settled.endpoint,
            chain_id=settled.chain_id,
            subject=settled.subject,
            policy_id=settled.policy_id,
            reference=settled.reference,
            status=UsageStatus.REVERSED.value,
            breakdown=json.dumps(
                {"reverses": event_id, "blockNumber": int(inclusion.block_number)}
            ),
            settled_at=at,
        )
    )
    draws = (
        await db.execute(
            select(usage_draws.c.lot_id, usage_draws.c.credits).where(
                usage_draws.c.event_id == event_id, usage_draws.c.credits != 0
            )
        )
    ).all()
    if sum(int(d.credits) for d in draws) + overage != credits:
        raise LedgerError(f"event {event_id}'s draws and overage do not add up to its credits")
    for d in draws:
        await db.execute(
            insert(usage_draws).values(event_id=reversal_id, lot_id=d.lot_id, credits=-d.credits)
        )
        await db.execute(
            update(credit_lots)
            .where(credit_lots.c.lot_id == d.lot_id)
            .values(remaining=credit_lots.c.remaining + d.credits)
        )
    if overage:
        current = await db.scalar(
            select(projects.c.cycle_overage).where(projects.c.project_id == settled.project_id)
        )
        await db.execute(
            update(projects)
            .where(projects.c.project_id == settled.project_id)
            .values(cycle_overage=max(int(current or 0) - overage, 0))
        )
    await db.execute(
        update(_i).where(_i.c.event_id == event_id).values(reversal_event_id=reversal_id)
    )
    reversals = await db.scalar(
        select(func.count()).where(
            _i.c.project_id == settled.project_id,
            _i.c.hold_key == inclusion.hold_key,
            _i.c.reversal_event_id.is_not(None),
        )
    )
    done = Reversal(
        project_id=settled.project_id,
        chain_id=int(inclusion.chain_id),
        user_op_hash=inclusion.user_op_hash,
        hold_key=inclusion.hold_key,
        event_id=event_id,
        reversal_event_id=reversal_id,
        credits=credits,
        block_number=int(inclusion.block_number),
        transaction_hash=inclusion.transaction_hash,
        reversals=int(reversals or 0),
    )
    if follow_up is not None:
        await follow_up(db, done)
    return done


async def finalize(db: AsyncConnection, chain_id: int, up_to_block: int) -> int:
    """Mark final the chain's standing inclusions in blocks up to `up_to_block`; how many."""
    done = await db.execute(
        update(_i)
        .where(
            _i.c.chain_id == chain_id,
            _i.c.block_number <= up_to_block,
            _i.c.final.is_(False),
            _i.c.reversal_event_id.is_(None),
        )
        .values(final=True)
    )
    return int(done.rowcount or 0)


async def unsettled_inclusions(db: AsyncConnection, project_id: str, user_op_hash: str) -> int:
    """How many of an op's standing settlements are not final yet."""
    return int(
        await db.scalar(
            select(func.count()).where(
                _i.c.project_id == project_id,
                _i.c.user_op_hash == user_op_hash.lower(),
                _i.c.reversal_event_id.is_(None),
                _i.c.final.is_(False),
            )
        )
        or 0
    )


async def inclusion_of(db: AsyncConnection, project_id: str, user_op_hash: str) -> int | None:
    """The block of the op's standing settlement, if it has one."""
    found = await db.scalar(
        select(func.max(_i.c.block_number)).where(
            _i.c.project_id == project_id,
            _i.c.user_op_hash == user_op_hash.lower(),
            _i.c.reversal_event_id.is_(None),
        )
    )
    return None if found is None else int(found)
