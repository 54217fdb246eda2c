"""Usage read back: breakdowns, trends and exports of a project's usage events, and the
counters of free requests. Reads only, except `add_request_counts` (one upsert per flush)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.storage.ledger import UsageStatus, utc
from entryway.storage.schema import request_counts, usage_events

GROUPINGS = ("operation", "key", "endpoint", "chain", "day", "week", "month")
EXPORT_PAGE = 1_000  # usage events read per query of an export


@dataclass(frozen=True, slots=True)
class RequestCountKey:
    project_id: str
    key_id: str
    endpoint: str
    chain_id: int  # 0: no chain
    day: str  # YYYY-MM-DD, UTC


@dataclass(frozen=True, slots=True)
class UsageEvent:
    event_id: str
    created_at: datetime
    operation: str
    credits: int
    overage: int
    status: str
    key_id: str | None
    endpoint: str | None
    chain_id: int | None
    subject: str | None
    idempotency_key: str
    # On OP-stack chains, the L1 data fee inside a sponsored op's credits (shown, not added).
    l1_fee_wei: int | None = None
    l1_fee_credits: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "eventId": self.event_id,
            "createdAt": self.created_at.isoformat(),
            "operation": self.operation,
            "credits": self.credits,
            "overage": self.overage,
            "status": self.status,
            "keyId": self.key_id,
            "endpoint": self.endpoint,
            "chainId": self.chain_id,
            "subject": self.subject,
            "idempotencyKey": self.idempotency_key,
            "l1FeeWei": None if self.l1_fee_wei is None else hex(self.l1_fee_wei),
            "l1FeeCredits": self.l1_fee_credits,
        }


def _included(breakdown: str | None) -> dict[str, int]:
    """The figures a charge's breakdown shows inside its components (`Quote.included`)."""
    if not breakdown:
        return {}
    included = json.loads(breakdown).get("included")
    return included if isinstance(included, dict) else {}


def period_of(moment: datetime, grouping: str) -> str:
    if grouping == "day":
        return f"{moment:%Y-%m-%d}"
    if grouping == "week":
        year, week, _ = moment.isocalendar()
        return f"{year}-W{week:02d}"
    return f"{moment:%Y-%m}"


class UsageQueries:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def events(
        self, project_id: str, since: datetime, until: datetime
    ) -> AsyncIterator[UsageEvent]:
        """Events in [since, until), oldest first, streamed page by page.

        Each page is read on a connection given back before its events are yielded: the
        consumer is an HTTP client that may read slowly or go away mid-export, and a stream
        abandoned while holding a connection would keep it out of the pool (SQLite has one)
        until the garbage collector found it."""
        after: tuple[datetime, str] | None = None
        while True:
            query = (
                select(usage_events)
                .where(
                    usage_events.c.project_id == project_id,
                    usage_events.c.created_at >= since,
                    usage_events.c.created_at < until,
                )
                .order_by(usage_events.c.created_at, usage_events.c.event_id)
                .limit(EXPORT_PAGE)
            )
            if after is not None:
                # Keyset paging on the order's own columns: stable while events are added.
                at, event_id = after
                query = query.where(
                    (usage_events.c.created_at > at)
                    | ((usage_events.c.created_at == at) & (usage_events.c.event_id > event_id))
                )
            async with self.engine.connect() as db:
                page = (await db.execute(query)).all()
            for r in page:
                yield _usage_event(r)
            if len(page) < EXPORT_PAGE:
                return
            after = (page[-1].created_at, page[-1].event_id)

    async def used_since(self, project_id: str, since: datetime) -> int:
        """Credits charged since `since` (released holds count nothing)."""
        async with self.engine.connect() as db:
            total = await db.scalar(
                select(func.coalesce(func.sum(usage_events.c.credits), 0)).where(
                    usage_events.c.project_id == project_id,
                    usage_events.c.created_at >= since,
                    usage_events.c.status != UsageStatus.RELEASED.value,
                )
            )
        return int(total or 0)

    async def breakdown(
        self, project_id: str, since: datetime, until: datetime, grouping: str
    ) -> dict[str, dict[str, int]]:
        """{group: {"credits", "operations", "requests"}} for one grouping of GROUPINGS.
        Free requests (counted, not charged one by one) join by key, endpoint, chain and
        period."""
        if grouping not in GROUPINGS:
            raise ValueError(f"grouping must be one of {', '.join(GROUPINGS)}")
        groups: dict[str, dict[str, int]] = defaultdict(
            lambda: {"credits": 0, "operations": 0, "requests": 0}
        )
        async for e in self.events(project_id, since, until):
            if e.status == UsageStatus.RELEASED.value:
                continue
            label = {
                "operation": e.operation,
                "key": e.key_id or "-",
                "endpoint": e.endpoint or "-",
                "chain": str(e.chain_id or "-"),
            }.get(grouping) or period_of(e.created_at, grouping)
            groups[label]["credits"] += e.credits
            groups[label]["operations"] += 1
        async with self.engine.connect() as db:
            rows = (
                await db.execute(
                    select(request_counts).where(
                        request_counts.c.project_id == project_id,
                        request_counts.c.day >= f"{since:%Y-%m-%d}",
                        request_counts.c.day <= f"{until:%Y-%m-%d}",
                    )
                )
            ).all()
        for r in rows:
            day = datetime.strptime(r.day, "%Y-%m-%d")
            label = {
                "operation": "read",
                "key": r.key_id,
                "endpoint": r.endpoint,
                "chain": str(r.chain_id or "-"),
            }.get(grouping) or period_of(day, grouping)
            groups[label]["requests"] += int(r.requests)
            groups[label]["credits"] += int(r.credits)
        return dict(sorted(groups.items()))

    async def add_request_counts(self, counts: Mapping[RequestCountKey, tuple[int, int]]) -> None:
        """Add (requests, credits) to each counter, creating it when new. One transaction."""
        if not counts:
            return
        async with self.engine.begin() as db:
            make = pg_insert if db.dialect.name == "postgresql" else sqlite_insert
            for key, (n, credits) in counts.items():
                stmt = make(request_counts).values(
                    project_id=key.project_id,
                    key_id=key.key_id,
                    endpoint=key.endpoint,
                    chain_id=key.chain_id,
                    day=key.day,
                    requests=n,
                    credits=credits,
                )
                stmt = stmt.on_conflict_do_update(
                    index_elements=["project_id", "key_id", "endpoint", "chain_id", "day"],
                    set_={
                        "requests": request_counts.c.requests + n,
                        "credits": request_counts.c.credits + credits,
                    },
                )
                await db.execute(stmt)


def _usage_event(r: Any) -> UsageEvent:
    included = _included(r.breakdown)
    return UsageEvent(
        r.event_id,
        utc(r.created_at),
        r.operation,
        int(r.credits),
        int(r.overage),
        r.status,
        r.key_id,
        r.endpoint,
        r.chain_id,
        r.subject,
        r.idempotency_key,
        included.get("l1_fee_wei"),
        included.get("l1_fee_credits"),
    )
