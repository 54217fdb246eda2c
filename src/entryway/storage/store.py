"""Tenants, keys and credits in the database: each method is one unit of work (one
transaction), so a usage event and the ledger postings it causes commit together or not at all.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.apikeys import IssuedKey, KeyEnvironment, KeyRole
from entryway.domain.billing import EnterpriseTerms, Subscription
from entryway.domain.credits import CreditAccount, CreditLot, LotKind, check_amount
from entryway.domain.plans import PlanName
from entryway.domain.plans import plan as plan_of
from entryway.errors import EntrywayError
from entryway.storage.apikeys import MAX_KEYS_PER_PROJECT, ApiKeyStore, KeyInfo
from entryway.storage.apikeys import Caller as Caller  # where the service layer imports it
from entryway.storage.apikeys import chains_text as _chains
from entryway.storage.apikeys import parse_chains as _parse_chains
from entryway.storage.apikeys import utc as _utc
from entryway.storage.ledger import Ledger, UsageRecord, lot_row
from entryway.storage.schema import credit_lots, memberships, projects, users
from entryway.storage.signatures import SignatureStore


def grant_lot_id(project_id: str, cycle_start: datetime) -> str:
    """One grant per project and cycle: the id makes a second grant of a cycle impossible."""
    return f"{project_id}-grant-{cycle_start.astimezone(UTC):%Y%m%dT%H%M%S}"


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
    enterprise_terms: EnterpriseTerms = field(default_factory=EnterpriseTerms)  # unset: service's
    overage_budget: int | None = None  # the owner's spending budget; None: no limit

    @property
    def subscription(self) -> Subscription:
        return Subscription(self.plan, self.cycle_started_at, self.next_plan)


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
        overage_budget=None if r.overage_budget is None else int(r.overage_budget),
        enterprise_terms=EnterpriseTerms(
            r.enterprise_monthly_micro_eur, r.enterprise_monthly_credits
        ),
    )


class Store:
    def __init__(
        self,
        engine: AsyncEngine,
        *,
        auth_cache_seconds: float = AUTH_CACHE_SECONDS,
        max_keys_per_project: int = MAX_KEYS_PER_PROJECT,
    ):
        self.engine = engine
        self.ledger = Ledger(engine)
        self.api_keys = ApiKeyStore(
            engine, auth_cache_seconds=auth_cache_seconds, max_active=max_keys_per_project
        )
        self.signatures = SignatureStore(engine)  # the paymaster's, and the chains' events read

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
            await db.execute(
                insert(memberships).values(
                    project_id=project_id, user_id=owner_id, role="owner", created_at=at
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
        overage_budget: int | None = _UNSET,
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
        if overage_budget is not _UNSET:
            if overage_budget is not None:
                check_amount(overage_budget, "a spending budget")  # what the database holds
            values["overage_budget"] = overage_budget
        if values:
            async with self.engine.begin() as db:
                await db.execute(
                    update(projects).where(projects.c.project_id == project_id).values(**values)
                )
            self.api_keys.forget_project(project_id)
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
    # The key operations most callers need; LastAdminKeyError and UnknownKeyError come from
    # `entryway.storage.apikeys`.

    async def issue_key(
        self,
        project_id: str,
        environment: KeyEnvironment,
        chains: Sequence[int],
        at: datetime,
        *,
        role: KeyRole = KeyRole.SERVICE,
        replacing: str | None = None,
        capped: bool = True,
    ) -> IssuedKey:
        """A new key, `service` unless `role` says otherwise (a project's first key is
        issued `admin` by whoever creates the project). KeyLimitError if the project holds
        its most active keys already, not counting `replacing` (a key about to be revoked
        for this one: a rotation); `capped=False` lifts the limit (the operator's routes)."""
        return await self.api_keys.issue(
            project_id, environment, chains, at, role, replacing=replacing, capped=capped
        )

    async def keys(self, project_id: str) -> list[KeyInfo]:
        return await self.api_keys.keys(project_id)

    async def revoke_key(self, key_id: str, at: datetime, *, project_id: str | None = None) -> None:
        await self.api_keys.revoke(key_id, at, project_id=project_id)

    async def authenticate(self, secret: str) -> Caller:
        return await self.api_keys.authenticate(secret)

    # The ledger's entry points most callers need; the rest is on `self.ledger`.
    async def add_lot(self, project_id: str, lot: CreditLot) -> bool:
        return await self.ledger.add_lot(project_id, lot)

    async def credit_account(self, project_id: str) -> CreditAccount:
        return await self.ledger.account(project_id)

    async def record_usage(
        self, project_id: str, idempotency_key: str, operation: str, credits: int, at: datetime
    ) -> UsageRecord:
        return await self.ledger.record_usage(project_id, idempotency_key, operation, credits, at)
