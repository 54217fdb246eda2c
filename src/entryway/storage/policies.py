"""Sponsorship policies and their counters in the database.

`PolicyStore` keeps each project's policies (rules as JSON text, validated by the domain
model on the way in); `SqlSponsorshipUsage` sums what a policy has paid for from the usage
events its sponsorships wrote (held and settled count, released do not).
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.pricebook import OperationType
from entryway.domain.sponsorship import SponsorshipPolicy, SponsorshipRules
from entryway.paymaster.ports import UsageTotals
from entryway.storage.schema import sponsorship_policies, usage_events

_RELEASED = "released"


def _utc(moment: datetime | None) -> datetime | None:
    if moment is None:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _policy(row: Any) -> SponsorshipPolicy:
    created = _utc(row.created_at)
    assert created is not None
    return SponsorshipPolicy(
        policy_id=row.policy_id,
        project_id=row.project_id,
        name=row.name,
        rules=SponsorshipRules.from_json(json.loads(row.rules)),
        active=bool(row.active),
        created_at=created,
        updated_at=_utc(row.updated_at),
    )


def _rules_text(rules: SponsorshipRules) -> str:
    return json.dumps(rules.to_json(), sort_keys=True, separators=(",", ":"))


class PolicyStore:
    """One project's policies; every method is scoped by project, so a key of one project
    never reads or changes another's."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def create(
        self, project_id: str, name: str, rules: SponsorshipRules, *, active: bool, at: datetime
    ) -> SponsorshipPolicy:
        policy = SponsorshipPolicy(str(uuid.uuid4()), project_id, name, rules, active, at)
        async with self.engine.begin() as db:
            await db.execute(
                insert(sponsorship_policies).values(
                    policy_id=policy.policy_id,
                    project_id=project_id,
                    name=name,
                    rules=_rules_text(rules),
                    active=active,
                    created_at=at,
                )
            )
        return policy

    async def get(self, project_id: str, policy_id: str) -> SponsorshipPolicy | None:
        async with self.engine.connect() as db:
            row = (
                await db.execute(
                    select(sponsorship_policies).where(
                        sponsorship_policies.c.project_id == project_id,
                        sponsorship_policies.c.policy_id == policy_id,
                    )
                )
            ).one_or_none()
        return None if row is None else _policy(row)

    async def project_policies(self, project_id: str) -> list[SponsorshipPolicy]:
        """Oldest first."""
        async with self.engine.connect() as db:
            rows = (
                await db.execute(
                    select(sponsorship_policies)
                    .where(sponsorship_policies.c.project_id == project_id)
                    .order_by(sponsorship_policies.c.created_at, sponsorship_policies.c.policy_id)
                )
            ).all()
        return [_policy(r) for r in rows]

    async def update(
        self,
        project_id: str,
        policy_id: str,
        *,
        at: datetime,
        name: str | None = None,
        rules: SponsorshipRules | None = None,
        active: bool | None = None,
    ) -> SponsorshipPolicy | None:
        """Change what is given; None when the project has no such policy."""
        values: dict[str, Any] = {"updated_at": at}
        if name is not None:
            values["name"] = name
        if rules is not None:
            values["rules"] = _rules_text(rules)
        if active is not None:
            values["active"] = active
        async with self.engine.begin() as db:
            result = await db.execute(
                update(sponsorship_policies)
                .where(
                    sponsorship_policies.c.project_id == project_id,
                    sponsorship_policies.c.policy_id == policy_id,
                )
                .values(**values)
            )
        if result.rowcount == 0:
            return None
        return await self.get(project_id, policy_id)

    async def delete(self, project_id: str, policy_id: str) -> bool:
        """Remove the policy; its usage events keep its id (and their history)."""
        async with self.engine.begin() as db:
            result = await db.execute(
                delete(sponsorship_policies).where(
                    sponsorship_policies.c.project_id == project_id,
                    sponsorship_policies.c.policy_id == policy_id,
                )
            )
        return bool(result.rowcount)


class SqlSponsorshipUsage:
    """The policies' counters, summed from `usage_events`."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def totals(
        self,
        project_id: str,
        policy_id: str,
        *,
        since: datetime | None,
        subject: str | None = None,
        excluding: str | None = None,
    ) -> UsageTotals:
        e = usage_events.c
        query = select(func.coalesce(func.sum(e.credits), 0), func.count()).where(
            e.project_id == project_id,
            e.policy_id == policy_id,
            e.operation == OperationType.SPONSORED_USER_OPERATION.value,
            e.status != _RELEASED,
        )
        if since is not None:
            query = query.where(e.created_at >= since)
        if subject is not None:
            query = query.where(e.subject == subject)
        if excluding is not None:
            query = query.where(e.idempotency_key != excluding)
        async with self.engine.connect() as db:
            credits, operations = (await db.execute(query)).one()
        return UsageTotals(int(credits), int(operations))
