"""Tenants, keys and credits in the database: each method is one unit of work (one
transaction), so a usage event and the ledger postings it causes commit together or not at all.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import and_, insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.apikeys import InvalidApiKeyError, IssuedKey, KeyEnvironment, issue, parse
from entryway.domain.billing import Subscription
from entryway.domain.credits import CreditAccount, CreditLot, LotKind
from entryway.domain.plans import PlanName
from entryway.domain.plans import plan as plan_of
from entryway.errors import EntrywayError
from entryway.storage.ledger import Ledger, UsageRecord, lot_row
from entryway.storage.schema import api_keys, credit_lots, projects, users


def grant_lot_id(project_id: str, cycle_start: datetime) -> str:
    """One grant per project and cycle: the id makes a second grant of a cycle impossible."""
    return f"{project_id}-grant-{cycle_start.astimezone(UTC):%Y%m%dT%H%M%S}"


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
class Project:
    project_id: str
    owner_id: str
    name: str
    plan: PlanName
    next_plan: PlanName | None
    chains: frozenset[int]
    aa_module_enabled: bool
    created_at: datetime
    cycle_started_at: datetime
    cycle_overage: int
    low_balance_credits: int | None

    @property
    def subscription(self) -> Subscription:
        return Subscription(self.plan, self.cycle_started_at, self.next_plan)


@dataclass(frozen=True, slots=True)
class KeyInfo:
    key_id: str
    environment: KeyEnvironment
    chains: frozenset[int]
    created_at: datetime
    revoked_at: datetime | None


class UnknownError(EntrywayError):
    """No such project or key (or not the caller's)."""


_UNSET: Any = object()
AUTH_CACHE_SECONDS = 5.0


def project_from_row(r: Any) -> Project:
    return Project(
        project_id=r.project_id,
        owner_id=r.owner_id,
        name=r.name,
        plan=PlanName(r.plan),
        next_plan=PlanName(r.next_plan) if r.next_plan else None,
        chains=_parse_chains(r.chains),
        aa_module_enabled=bool(r.aa_module_enabled),
        created_at=_utc(r.created_at),
        cycle_started_at=_utc(r.cycle_started_at or r.created_at),
        cycle_overage=int(r.cycle_overage),
        low_balance_credits=r.low_balance_credits,
    )


class Store:
    def __init__(self, engine: AsyncEngine, *, auth_cache_seconds: float = AUTH_CACHE_SECONDS):
        self.engine = engine
        self.ledger = Ledger(engine)
        # Authenticated keys, briefly: a revocation or chain change made through this process
        # applies at once; one made by another process within `auth_cache_seconds`.
        self._auth_cache: dict[str, tuple[float, Caller]] = {}
        self._auth_cache_seconds = auth_cache_seconds

    async def create_user(self, email: str, at: datetime) -> str:
        user_id = str(uuid.uuid4())
        async with self.engine.begin() as db:
            await db.execute(insert(users).values(user_id=user_id, email=email, created_at=at))
        return user_id

    async def user_by_email(self, email: str) -> str | None:
        async with self.engine.connect() as db:
            found = await db.scalar(select(users.c.user_id).where(users.c.email == email))
        return None if found is None else str(found)

    async def create_project(
        self,
        owner_id: str,
        name: str,
        plan: PlanName,
        chains: Sequence[int],
        at: datetime,
        *,
        grant: int | None = None,
    ) -> str:
        """A project on `plan`, its first cycle starting now, with the cycle's grant as a lot
        (`grant` overrides the plan's monthly credits, e.g. for ENTERPRISE)."""
        project_id = str(uuid.uuid4())
        credits = plan_of(plan).monthly_credits if grant is None else grant
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
                    cycle_started_at=at,
                    cycle_overage=0,
                )
            )
            if credits:
                lot = CreditLot.new(grant_lot_id(project_id, at), LotKind.GRANT, credits, at)
                await db.execute(insert(credit_lots).values(project_id=project_id, **lot_row(lot)))
        return project_id

    async def project(self, project_id: str) -> Project:
        async with self.engine.connect() as db:
            row = (
                await db.execute(select(projects).where(projects.c.project_id == project_id))
            ).one_or_none()
        if row is None:
            raise UnknownError(f"no project {project_id}")
        return project_from_row(row)

    async def project_ids_with_chain(self, chain_id: int) -> list[str]:
        async with self.engine.connect() as db:
            rows = (await db.execute(select(projects.c.project_id, projects.c.chains))).all()
        return [r.project_id for r in rows if chain_id in _parse_chains(r.chains)]

    async def update_project(
        self,
        project_id: str,
        *,
        name: str = _UNSET,
        chains: Sequence[int] = _UNSET,
        aa_module_enabled: bool = _UNSET,
        low_balance_credits: int | None = _UNSET,
    ) -> Project:
        values: dict[str, Any] = {}
        if name is not _UNSET:
            values["name"] = name
        if chains is not _UNSET:
            values["chains"] = _chains(chains)
        if aa_module_enabled is not _UNSET:
            values["aa_module_enabled"] = aa_module_enabled
        if low_balance_credits is not _UNSET:
            values["low_balance_credits"] = low_balance_credits
        if values:
            async with self.engine.begin() as db:
                await db.execute(
                    update(projects).where(projects.c.project_id == project_id).values(**values)
                )
            self._forget_project(project_id)
        return await self.project(project_id)

    async def schedule_plan_change(self, project_id: str, to: PlanName) -> Project:
        """Takes effect when the next cycle starts; asking for the current plan cancels."""
        current = await self.project(project_id)
        scheduled = current.subscription.change_plan(to).next_plan
        async with self.engine.begin() as db:
            await db.execute(
                update(projects)
                .where(projects.c.project_id == project_id)
                .values(next_plan=scheduled.value if scheduled else None)
            )
        return await self.project(project_id)

    # ---------------------------------------------------------------- keys

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

    async def keys(self, project_id: str) -> list[KeyInfo]:
        async with self.engine.connect() as db:
            rows = (
                await db.execute(
                    select(api_keys)
                    .where(api_keys.c.project_id == project_id)
                    .order_by(api_keys.c.created_at, api_keys.c.key_id)
                )
            ).all()
        return [
            KeyInfo(
                r.key_id,
                KeyEnvironment(r.environment),
                _parse_chains(r.chains),
                _utc(r.created_at),
                _utc(r.revoked_at) if r.revoked_at else None,
            )
            for r in rows
        ]

    async def revoke_key(self, key_id: str, at: datetime, *, project_id: str | None = None) -> None:
        """Revoke a key (only within `project_id` when given: another project's key is
        unknown to the caller)."""
        where = api_keys.c.key_id == key_id
        if project_id is not None:
            where = and_(where, api_keys.c.project_id == project_id)
        async with self.engine.begin() as db:
            done = await db.execute(
                update(api_keys).where(where, api_keys.c.revoked_at.is_(None)).values(revoked_at=at)
            )
        self._auth_cache.clear()
        if not done.rowcount and project_id is not None:
            known = [k.key_id for k in await self.keys(project_id)]
            if key_id not in known:
                raise UnknownError(f"no key {key_id}")

    async def set_key_chains(self, project_id: str, key_id: str, chains: Sequence[int]) -> None:
        async with self.engine.begin() as db:
            done = await db.execute(
                update(api_keys)
                .where(api_keys.c.key_id == key_id, api_keys.c.project_id == project_id)
                .values(chains=_chains(chains))
            )
        self._auth_cache.clear()
        if not done.rowcount:
            raise UnknownError(f"no key {key_id}")

    async def authenticate(self, secret: str) -> Caller:
        cached = self._auth_cache.get(secret)
        now = time.monotonic()
        if cached is not None and cached[0] > now:
            return cached[1]
        caller = await self._authenticate(secret)
        if len(self._auth_cache) > 10_000:
            self._auth_cache.clear()
        self._auth_cache[secret] = (now + self._auth_cache_seconds, caller)
        return caller

    def _forget_project(self, project_id: str) -> None:
        for secret, (_, caller) in list(self._auth_cache.items()):
            if caller.project_id == project_id:
                self._auth_cache.pop(secret, None)

    async def _authenticate(self, secret: str) -> Caller:
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

    # The ledger's entry points most callers need; the rest is on `self.ledger`.
    async def add_lot(self, project_id: str, lot: CreditLot) -> bool:
        return await self.ledger.add_lot(project_id, lot)

    async def credit_account(self, project_id: str) -> CreditAccount:
        return await self.ledger.account(project_id)

    async def record_usage(
        self, project_id: str, idempotency_key: str, operation: str, credits: int, at: datetime
    ) -> UsageRecord:
        return await self.ledger.record_usage(project_id, idempotency_key, operation, credits, at)
