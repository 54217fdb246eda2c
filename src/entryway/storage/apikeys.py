"""API keys in the database: issue, list, change, revoke, authenticate.

A project never loses its last admin key through a revocation or a demotion: the check and
the change are one conditional UPDATE ("… unless no other active admin key remains"), made
after the project's row is locked on PostgreSQL. The lock matters there: under READ
COMMITTED two transactions revoking two different admin keys would each still see the other
key active. SQLite has one writer at a time and the UPDATE, first in its transaction, reads
under that write lock, so it needs none.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import ColumnElement, exists, func, insert, literal, or_, select, true, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from entryway.domain.apikeys import (
    InvalidApiKeyError,
    IssuedKey,
    KeyEnvironment,
    KeyRole,
    issue,
    parse,
)
from entryway.domain.key_allowlist import ANYWHERE, KeyAllowlist
from entryway.domain.plans import PlanName
from entryway.errors import EntrywayError
from entryway.storage.schema import api_keys, projects
from entryway.storage.single_flight import SingleFlight

_ADMIN = KeyRole.ADMIN.value
MAX_KEYS_PER_PROJECT = 20  # active keys, by default (ENTRYWAY_MAX_KEYS_PER_PROJECT)
LAST_USE_EVERY_S = 60.0  # a key's last use is written at most this often by one process
log = logging.getLogger(__name__)


class UnknownKeyError(EntrywayError):
    """No such key (or not in the caller's project)."""


class LastAdminKeyError(EntrywayError):
    """The change would leave the project without an active admin key."""


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
    # Authentication reads it from the key; a Caller built without one gets the lesser role.
    role: KeyRole = KeyRole.SERVICE
    allowlist: KeyAllowlist = ANYWHERE  # where the key may be used from

    @property
    def chains(self) -> frozenset[int]:
        """The chains the key may reach: its own that the project still has."""
        return self.key_chains & self.project_chains


@dataclass(frozen=True, slots=True)
class KeyInfo:
    key_id: str
    environment: KeyEnvironment
    chains: frozenset[int]
    created_at: datetime
    revoked_at: datetime | None
    role: KeyRole
    last_used_at: datetime | None = None  # to the minute (LAST_USE_EVERY_S)
    name: str | None = None
    allowlist: KeyAllowlist = ANYWHERE


def chains_text(value: Sequence[int]) -> str:
    return ",".join(str(c) for c in sorted(set(value)))


def parse_chains(value: str) -> frozenset[int]:
    return frozenset(int(c) for c in value.split(",") if c)


def utc(moment: datetime) -> datetime:
    """SQLite hands datetimes back naive; they were stored as UTC."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _key_info(r: Any) -> KeyInfo:
    return KeyInfo(
        r.key_id,
        KeyEnvironment(r.environment),
        parse_chains(r.chains),
        utc(r.created_at),
        utc(r.revoked_at) if r.revoked_at else None,
        KeyRole(r.role),
        utc(r.last_used_at) if r.last_used_at else None,
        r.name,
        KeyAllowlist.from_columns(r.allowed_origins, r.allowed_clients),
    )


def _another_active_admin() -> ColumnElement[bool]:
    """True while the updated key's project keeps an active admin key besides it."""
    other = api_keys.alias("other_key")
    return exists().where(
        other.c.project_id == api_keys.c.project_id,
        other.c.key_id != api_keys.c.key_id,
        other.c.role == _ADMIN,
        other.c.revoked_at.is_(None),
    )


def _leaves_an_admin() -> ColumnElement[bool]:
    """The row may lose its active admin standing: it has none, or another key keeps one."""
    return or_(
        api_keys.c.role != _ADMIN, api_keys.c.revoked_at.is_not(None), _another_active_admin()
    )


class KeyLimitError(EntrywayError):
    """The project holds as many active keys as it may: revoke one before making another."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"the project has {limit} active API keys, the most it may hold; "
            "revoke one before creating another"
        )
        self.limit = limit


class ApiKeyStore:
    def __init__(
        self,
        engine: AsyncEngine,
        *,
        auth_cache_seconds: float,
        max_active: int = MAX_KEYS_PER_PROJECT,
    ) -> None:
        self.engine = engine
        self.max_active = max_active
        # Authenticated keys, briefly: a revocation or change made through this process
        # applies at once; one made by another process within `auth_cache_seconds`.
        self._auth_cache: dict[str, tuple[float, Caller]] = {}
        self._auth_cache_seconds = auth_cache_seconds
        self._reading: SingleFlight[str, Caller] = SingleFlight()
        self._last_use_written: dict[str, float] = {}  # key id -> monotonic time

    async def issue(
        self,
        project_id: str,
        environment: KeyEnvironment,
        chains: Sequence[int],
        at: datetime,
        role: KeyRole,
        *,
        replacing: str | None = None,
        capped: bool = True,
    ) -> IssuedKey:
        """A new key, unless the project holds `max_active` active keys already (KeyLimitError),
        `replacing` left out of the count: a rotation revokes it right after. `capped=False`
        is the operator's way past the limit (a project whose keys are all service keys
        gets an admin key back)."""
        key = issue(environment)
        async with self.engine.begin() as db:
            await _lock_project(db, project_id)
            values = {
                "key_id": key.key_id,
                "project_id": project_id,
                "environment": environment.value,
                "digest": key.digest,
                "chains": chains_text(chains),
                "created_at": at,
                "role": role.value,
            }
            active = (
                select(func.count())
                .select_from(api_keys)
                .where(
                    api_keys.c.project_id == project_id,
                    api_keys.c.revoked_at.is_(None),
                    api_keys.c.key_id != (replacing or ""),
                )
                .scalar_subquery()
            )
            # Counted and inserted in one statement: on SQLite it runs under the write lock,
            # on PostgreSQL under the project's row lock, so two issues never both see room.
            row = select(*(literal(v, api_keys.c[k].type) for k, v in values.items()))
            if capped:
                row = row.where(active < self.max_active)
            done = await db.execute(insert(api_keys).from_select(list(values), row))
            if not done.rowcount:
                raise KeyLimitError(self.max_active)
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
        return [_key_info(r) for r in rows]

    async def key(self, project_id: str, key_id: str) -> KeyInfo:
        async with self.engine.connect() as db:
            row = (
                await db.execute(select(api_keys).where(*_mine(project_id, key_id)))
            ).one_or_none()
        if row is None:
            raise UnknownKeyError(f"no key {key_id}")
        return _key_info(row)

    async def revoke(self, key_id: str, at: datetime, *, project_id: str | None = None) -> None:
        """Revoke a key (only within `project_id` when given: another project's key is
        unknown to the caller). Revoking a revoked key changes nothing; revoking the
        project's last active admin key raises LastAdminKeyError."""
        where = _mine(project_id, key_id)
        async with self.engine.begin() as db:
            await _lock_project_of(db, key_id)
            done = await db.execute(
                update(api_keys)
                .where(*where, api_keys.c.revoked_at.is_(None), _leaves_an_admin())
                .values(revoked_at=at)
            )
            found = None if done.rowcount else await _row(db, where)
        self._forget_callers()
        if done.rowcount:
            return
        if found is None:
            raise UnknownKeyError(f"no key {key_id}")
        if found.revoked_at is None:
            raise LastAdminKeyError(f"key {key_id} is the project's last active admin key")

    async def change(
        self,
        project_id: str,
        key_id: str,
        *,
        chains: Sequence[int] | None = None,
        role: KeyRole | None = None,
        name: str | None = None,
        allowlist: KeyAllowlist | None = None,
    ) -> KeyInfo:
        """Set a key's chains, role, name and/or allowlist; demoting the project's last
        active admin key raises LastAdminKeyError."""
        values: dict[str, str | None] = {}
        if name is not None:
            values["name"] = name or None
        if allowlist is not None:
            values.update(allowlist.to_columns())
        if chains is not None:
            values["chains"] = chains_text(chains)
        if role is not None:
            values["role"] = role.value
        if not values:
            return await self.key(project_id, key_id)
        where = _mine(project_id, key_id)
        guard = _leaves_an_admin() if role is KeyRole.SERVICE else true()
        async with self.engine.begin() as db:
            await _lock_project_of(db, key_id)
            done = await db.execute(update(api_keys).where(*where, guard).values(**values))
            found = await _row(db, where)
        self._forget_callers()
        if found is None:
            raise UnknownKeyError(f"no key {key_id}")
        if not done.rowcount:
            raise LastAdminKeyError(f"key {key_id} is the project's last active admin key")
        return _key_info(found)

    async def authenticate(self, secret: str) -> Caller:
        cached = self._auth_cache.get(secret)
        now = time.monotonic()
        if cached is not None and cached[0] > now:
            caller = cached[1]
        else:
            # Requests in flight with the same key when its cache entry expires read it once.
            caller = await self._reading(secret, lambda: self._authenticate(secret))
            if len(self._auth_cache) > 10_000:
                self._auth_cache.clear()
            self._auth_cache[secret] = (now + self._auth_cache_seconds, caller)
        await self._note_use(caller.key_id, now)
        return caller

    async def _note_use(self, key_id: str, now: float) -> None:
        """Record the key's use, at most once a LAST_USE_EVERY_S: a write a minute per key
        and process, not one per request. A failed write costs the request nothing."""
        written = self._last_use_written.get(key_id)
        if written is not None and now - written < LAST_USE_EVERY_S:
            return
        if len(self._last_use_written) > 10_000:
            self._last_use_written.clear()
        self._last_use_written[key_id] = now
        try:
            async with self.engine.begin() as db:
                await db.execute(
                    update(api_keys)
                    .where(api_keys.c.key_id == key_id)
                    .values(last_used_at=datetime.now(UTC))
                )
        except (SQLAlchemyError, OSError):
            log.warning("could not record the last use of key %s", key_id, exc_info=True)

    def forget_project(self, project_id: str) -> None:
        self._reading = SingleFlight()  # a read begun before the change is not shared
        for secret, (_, caller) in list(self._auth_cache.items()):
            if caller.project_id == project_id:
                self._auth_cache.pop(secret, None)

    def _forget_callers(self) -> None:
        """After a change to keys: no cached caller, and no read begun before it shared."""
        self._auth_cache.clear()
        self._reading = SingleFlight()

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
            key_chains=parse_chains(row.chains),
            project_chains=parse_chains(row.project_chains),
            aa_module_enabled=row.aa_module_enabled,
            plan=PlanName(row.plan),
            role=KeyRole(row.role),
            allowlist=KeyAllowlist.from_columns(row.allowed_origins, row.allowed_clients),
        )


def _mine(project_id: str | None, key_id: str) -> list[ColumnElement[bool]]:
    where = [api_keys.c.key_id == key_id]
    if project_id is not None:
        where.append(api_keys.c.project_id == project_id)
    return where


async def _row(db: AsyncConnection, where: Sequence[ColumnElement[bool]]) -> Any:
    return (await db.execute(select(api_keys).where(*where))).one_or_none()


async def _lock_project(db: AsyncConnection, project_id: str) -> None:
    """PostgreSQL: hold the project row until commit (SQLite's one writer needs no lock)."""
    if db.dialect.name == "postgresql":
        await db.execute(
            select(projects.c.project_id)
            .where(projects.c.project_id == project_id)
            .with_for_update()
        )


async def _lock_project_of(db: AsyncConnection, key_id: str) -> None:
    """PostgreSQL: hold the key's project row until commit, so that one project's key
    revocations and role changes run one after another."""
    if db.dialect.name != "postgresql":
        return
    owner = select(api_keys.c.project_id).where(api_keys.c.key_id == key_id).scalar_subquery()
    await db.execute(
        select(projects.c.project_id).where(projects.c.project_id == owner).with_for_update()
    )
