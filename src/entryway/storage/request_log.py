"""The request log's rows: written in groups by the recorder, read back one project at a time
(newest first, by cursor), pruned by each plan's retention."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta

from sqlalchemy import and_, delete, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.storage.apikeys import utc
from entryway.storage.schema import projects, request_log


@dataclass(frozen=True, slots=True)
class LoggedCall:
    """One call as the log keeps it; `calls` > 1 is a summary of calls over the cap."""

    project_id: str
    at: datetime
    key_prefix: str
    chain_id: int | None
    method: str
    outcome: str  # "ok" | "error"
    http_status: int
    latency_us: int
    rpc_code: int | None = None
    message: str | None = None
    explanation: str | None = None
    sender: str | None = None
    nonce: str | None = None
    user_op_hash: str | None = None
    calls: int = 1
    entry_id: int = 0


MAX_REFUSALS = 100  # refusals of one op counted at most


@dataclass(frozen=True, slots=True)
class LogFilter:
    method: str | None = None
    outcome: str | None = None
    chain_id: int | None = None
    key_prefix: str | None = None
    sender: str | None = None
    since: datetime | None = None
    until: datetime | None = None


SEND = "rpc:eth_sendUserOperation"  # the logged name of a send


class RequestLogRecords:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def add(self, calls: Sequence[LoggedCall]) -> None:
        if not calls:
            return
        rows = [{k: v for k, v in asdict(c).items() if k != "entry_id"} for c in calls]
        async with self.engine.begin() as db:
            await db.execute(insert(request_log), rows)

    async def page(
        self, project_id: str, where: LogFilter, *, before: int | None, limit: int
    ) -> list[LoggedCall]:
        """The project's calls matching `where`, newest first, older than entry `before`."""
        t = request_log.c
        clauses = [t.project_id == project_id]
        if before is not None:
            clauses.append(t.entry_id < before)
        if where.method is not None:
            clauses.append(t.method == where.method)
        if where.outcome is not None:
            clauses.append(t.outcome == where.outcome)
        if where.chain_id is not None:
            clauses.append(t.chain_id == where.chain_id)
        if where.key_prefix is not None:
            clauses.append(t.key_prefix == where.key_prefix)
        if where.sender is not None:
            clauses.append(t.sender == where.sender.lower())
        if where.since is not None:
            clauses.append(t.at >= where.since)
        if where.until is not None:
            clauses.append(t.at < where.until)
        query = select(request_log).where(and_(*clauses)).order_by(t.entry_id.desc())
        async with self.engine.connect() as db:
            rows = (await db.execute(query.limit(limit))).mappings().all()
        return [LoggedCall(**{**dict(r), "at": utc(r["at"])}) for r in rows]

    async def refused_send(
        self, project_id: str, user_op_hash: str, chain_ids: Sequence[int]
    ) -> tuple[LoggedCall, int] | None:
        """The project's latest refused send of the op on one of `chain_ids`, and how many
        times it was refused; None when the log has none."""
        t = request_log.c
        where = and_(
            t.project_id == project_id,
            t.user_op_hash == user_op_hash.lower(),
            t.method == SEND,
            t.outcome == "error",
            t.chain_id.in_(sorted(chain_ids)),
        )
        query = select(request_log).where(where).order_by(t.entry_id.desc())
        async with self.engine.connect() as db:
            rows = (await db.execute(query.limit(MAX_REFUSALS))).mappings().all()
        if not rows:
            return None
        latest = LoggedCall(**{**dict(rows[0]), "at": utc(rows[0]["at"])})
        return latest, sum(int(r["calls"]) for r in rows)

    async def prune(self, retention: Mapping[str, timedelta], now: datetime) -> int:
        """Delete what each plan keeps no longer; returns the rows deleted."""
        deleted = 0
        async with self.engine.begin() as db:
            for plan_name, keep in retention.items():
                of_plan = select(projects.c.project_id).where(projects.c.plan == plan_name)
                result = await db.execute(
                    delete(request_log).where(
                        request_log.c.at < now - keep, request_log.c.project_id.in_(of_plan)
                    )
                )
                deleted += result.rowcount or 0
        return deleted
