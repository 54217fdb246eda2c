"""Tenants, keys and credits in the database: each method is one unit of work (one
transaction), so a usage event and the ledger postings it causes commit together or not at all.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from entryway.domain.apikeys import InvalidApiKeyError, IssuedKey, KeyEnvironment, issue, parse
from entryway.domain.credits import Consumption, CreditAccount, CreditLot, LotKind
from entryway.domain.plans import PlanName
from entryway.storage.schema import api_keys, credit_lots, projects, usage_events, users


def _chains(value: Sequence[int]) -> str:
    return ",".join(str(c) for c in sorted(set(value)))


def _parse_chains(value: str) -> frozenset[int]:
    return frozenset(int(c) for c in value.split(",") if c)


def _utc(moment: datetime) -> datetime:
    """SQLite hands datetimes back naive; they were stored as UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Caller:
    """Who an API key says is calling."""

    key_id: str
    project_id: str
    environment: KeyEnvironment
    key_chains: frozenset[int]
    project_chains: frozenset[int]
    aa_module_enabled: bool
    plan: PlanName


@dataclass(frozen=True, slots=True)
class UsageRecord:
    event_id: str
    credits: int
    overage: int
    duplicate: bool  # the idempotency key was seen before: nothing was charged again


class Store:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def create_user(self, email: str, at: datetime) -> str:
        user_id = str(uuid.uuid4())
        async with self.engine.begin() as db:
            await db.execute(insert(users).values(user_id=user_id, email=email, created_at=at))
        return user_id

    async def create_project(
        self, owner_id: str, name: str, plan: PlanName, chains: Sequence[int], at: datetime
    ) -> str:
        project_id = str(uuid.uuid4())
        async with self.engine.begin() as db:
            await db.execute(
                insert(projects).values(
                    project_id=project_id,
                    owner_id=owner_id,
                    name=name,
                    plan=plan.value,
                    aa_module_enabled=True,
                    chains=_chains(chains),
                    created_at=at,
                )
            )
        return project_id

    async def issue_key(
        self, project_id: str, environment: KeyEnvironment, chains: Sequence[int], at: datetime
    ) -> IssuedKey:
        key = issue(environment)
        async with self.engine.begin() as db:
            await db.execute(
                insert(api_keys).values(
                    key_id=key.key_id,
                    project_id=project_id,
                    environment=environment.value,
                    digest=key.digest,
                    chains=_chains(chains),
                    created_at=at,
                )
            )
        return key

    async def revoke_key(self, key_id: str, at: datetime) -> None:
        async with self.engine.begin() as db:
            await db.execute(
                update(api_keys).where(api_keys.c.key_id == key_id).values(revoked_at=at)
            )

    async def authenticate(self, secret: str) -> Caller:
        presented = parse(secret)
        async with self.engine.connect() as db:
            row = (
                await db.execute(
                    select(api_keys, projects.c.chains.label("project_chains"), projects.c.plan,
                           projects.c.aa_module_enabled)
                    .join(projects, projects.c.project_id == api_keys.c.project_id)
                    .where(api_keys.c.key_id == presented.key_id)
                )
            ).one_or_none()  # fmt: skip
        if row is None or row.revoked_at is not None or not presented.matches(row.digest):
            raise InvalidApiKeyError("unknown or revoked API key")
        return Caller(
            key_id=row.key_id,
            project_id=row.project_id,
            environment=KeyEnvironment(row.environment),
            key_chains=_parse_chains(row.chains),
            project_chains=_parse_chains(row.project_chains),
            aa_module_enabled=row.aa_module_enabled,
            plan=PlanName(row.plan),
        )

    async def add_lot(self, project_id: str, lot: CreditLot) -> None:
        async with self.engine.begin() as db:
            await db.execute(
                insert(credit_lots).values(
                    lot_id=lot.lot_id,
                    project_id=project_id,
                    kind=lot.kind.value,
                    amount=lot.amount,
                    remaining=lot.remaining,
                    granted_at=lot.granted_at,
                    expires_at=lot.expires_at,
                )
            )

    async def credit_account(self, project_id: str) -> CreditAccount:
        async with self.engine.connect() as db:
            return await self._account(db, project_id, lock=False)

    async def _account(self, db: AsyncConnection, project_id: str, *, lock: bool) -> CreditAccount:
        query = select(credit_lots).where(credit_lots.c.project_id == project_id)
        if lock and db.dialect.name == "postgresql":
            query = query.with_for_update()
        rows = (await db.execute(query)).all()
        account = CreditAccount()
        for r in rows:
            lot = CreditLot(
                r.lot_id,
                LotKind(r.kind),
                r.amount,
                r.remaining,
                _utc(r.granted_at),
                _utc(r.expires_at),
            )
            account = account.add(lot)
        return account

    async def record_usage(
        self, project_id: str, idempotency_key: str, operation: str, credits: int, at: datetime
    ) -> UsageRecord:
        """Charge `credits` FIFO from the project's lots, once per idempotency key."""
        try:
            return await self._record_usage(project_id, idempotency_key, operation, credits, at)
        except IntegrityError:
            # A concurrent call with the same key won the race; its transaction is the charge,
            # ours rolled back whole (lots included).
            return await self._record_usage(project_id, idempotency_key, operation, credits, at)

    async def _record_usage(
        self, project_id: str, idempotency_key: str, operation: str, credits: int, at: datetime
    ) -> UsageRecord:
        async with self.engine.begin() as db:
            existing = (
                await db.execute(
                    select(usage_events).where(
                        usage_events.c.project_id == project_id,
                        usage_events.c.idempotency_key == idempotency_key,
                    )
                )
            ).one_or_none()
            if existing is not None:
                return UsageRecord(existing.event_id, existing.credits, existing.overage, True)
            account = await self._account(db, project_id, lock=True)
            _, consumption = account.consume(credits, at)
            await self._post(db, consumption)
            event_id = str(uuid.uuid4())
            await db.execute(
                insert(usage_events).values(
                    event_id=event_id,
                    project_id=project_id,
                    idempotency_key=idempotency_key,
                    operation=operation,
                    credits=credits,
                    overage=consumption.overage,
                    created_at=at,
                )
            )
        return UsageRecord(event_id, credits, consumption.overage, False)

    @staticmethod
    async def _post(db: AsyncConnection, consumption: Consumption) -> None:
        for draw in consumption.draws:
            await db.execute(
                update(credit_lots)
                .where(credit_lots.c.lot_id == draw.lot_id)
                .values(remaining=credit_lots.c.remaining - draw.credits)
            )
