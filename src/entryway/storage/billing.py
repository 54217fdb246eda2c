"""Cycle closes, invoices and alerts in the database. A close is one unit of work: the invoice,
the plan change, the overage counter reset and the next month's grant commit together, and
the invoice's (project, cycle start) key makes closing the same cycle twice impossible.

The periodic sweep (`close_all_due`) closes each project on its own: a project whose close
fails is logged and left for the next sweep, and the others' cycles close on time."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from entryway.domain.billing import BillingConfig, EnterpriseTerms, Invoice, close_cycle
from entryway.domain.credits import CreditLot, LotKind
from entryway.domain.plans import PlanName
from entryway.storage.ledger import lot_row, utc
from entryway.storage.schema import alerts, credit_lots, invoices, projects
from entryway.storage.store import Project, UnknownError, grant_lot_id, project_from_row


@dataclass(frozen=True, slots=True)
class StoredInvoice:
    invoice_id: str
    invoice: Invoice
    created_at: datetime


@dataclass(frozen=True, slots=True)
class CycleSweep:
    """What one sweep closed, and the projects it could not (retried by the next sweep)."""

    closed: list[StoredInvoice] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Alert:
    alert_id: str
    kind: str
    cycle_start: datetime
    detail: str
    created_at: datetime


log = logging.getLogger(__name__)
# A close that keeps hitting a unique key is not a race with another process (that one
# resolves on the next look) but a row in the way: give up on the project, not loop on it.
CLOSE_RACE_RETRIES = 3


class Billing:
    def __init__(self, engine: AsyncEngine, config: BillingConfig | None = None) -> None:
        self.engine = engine
        self.config = config or BillingConfig()
        self._failing: set[str] = set()  # projects the sweep could not close

    async def close_due_cycles(self, project_id: str, at: datetime) -> list[StoredInvoice]:
        """Close every cycle of the project that ended by `at` (none when it is mid-cycle)."""
        closed: list[StoredInvoice] = []
        races = 0
        while True:
            try:
                async with self.engine.begin() as db:
                    done = await self._close_one(db, project_id, at)
            except IntegrityError:
                races += 1  # another process closed this cycle first: look again
                if races > CLOSE_RACE_RETRIES:
                    raise
                continue
            if done is None:
                return closed
            closed.append(done)
            races = 0

    async def close_all_due(self, at: datetime) -> CycleSweep:
        """Close the due cycles of every project, each project on its own: one that fails is
        logged with its id (once while it keeps failing) and the sweep goes on."""
        sweep = CycleSweep()
        for project_id in await self.due_projects(at):
            try:
                sweep.closed.extend(await self.close_due_cycles(project_id, at))
            except Exception:
                if project_id not in self._failing:
                    log.exception("cannot close the billing cycle of project %s", project_id)
                self._failing.add(project_id)
                sweep.failed.append(project_id)
            else:
                self._failing.discard(project_id)
        return sweep

    async def _close_one(
        self, db: AsyncConnection, project_id: str, at: datetime
    ) -> StoredInvoice | None:
        query = select(projects).where(projects.c.project_id == project_id)
        if db.dialect.name == "postgresql":
            query = query.with_for_update()
        row = (await db.execute(query)).one()
        project = project_from_row(row)
        sub = project.subscription
        if not sub.due(at):
            return None
        result = close_cycle(sub, project.cycle_overage, self.config_for(project))
        invoice_id = str(uuid.uuid4())
        inv = result.invoice
        await db.execute(
            insert(invoices).values(
                invoice_id=invoice_id,
                project_id=project_id,
                plan=inv.plan.value,
                cycle_start=inv.cycle_start,
                cycle_end=inv.cycle_end,
                plan_price_micro_eur=inv.plan_price_micro_eur,
                overage_credits=inv.overage_credits,
                overage_micro_eur=inv.overage_micro_eur,
                total_micro_eur=inv.total_micro_eur,
                created_at=at,
            )
        )
        nxt = result.next
        await db.execute(
            update(projects)
            .where(projects.c.project_id == project_id)
            .values(
                plan=nxt.plan.value,
                next_plan=None,
                cycle_started_at=nxt.cycle_start,
                cycle_overage=projects.c.cycle_overage - inv.overage_credits,
            )
        )
        if result.grant:
            lot_id = grant_lot_id(project_id, nxt.cycle_start)
            lot = CreditLot.new(lot_id, LotKind.GRANT, result.grant, nxt.cycle_start)
            await db.execute(insert(credit_lots).values(project_id=project_id, **lot_row(lot)))
        return StoredInvoice(invoice_id, inv, at)

    def config_for(self, project: Project) -> BillingConfig:
        """The billing terms of one project: the service's, with its own ENTERPRISE price and
        grant where the operator set them."""
        return self.config.with_terms(project.enterprise_terms)

    async def set_enterprise_terms(self, project_id: str, terms: EnterpriseTerms) -> None:
        """Set (or, with None, clear) a project's own ENTERPRISE price and grant: the next
        cycle close invoices and grants by them."""
        async with self.engine.begin() as db:
            done = await db.execute(
                update(projects)
                .where(projects.c.project_id == project_id)
                .values(
                    enterprise_monthly_micro_eur=terms.monthly_micro_eur,
                    enterprise_monthly_credits=terms.monthly_credits,
                )
            )
        if done.rowcount == 0:
            raise UnknownError(f"no project {project_id}")

    async def due_projects(self, at: datetime) -> list[str]:
        """Projects whose cycle has ended (for the periodic closer). A row that does not read
        as a project is logged and left out, not allowed to hide the others."""
        async with self.engine.connect() as db:
            rows = (await db.execute(select(projects))).all()
        due: list[str] = []
        for r in rows:
            try:
                if project_from_row(r).subscription.due(at):
                    due.append(r.project_id)
            except (ValueError, TypeError, OverflowError):
                if r.project_id not in self._failing:
                    log.exception("project %s cannot be read for its billing cycle", r.project_id)
                self._failing.add(r.project_id)
        return due

    async def invoices(self, project_id: str) -> list[StoredInvoice]:
        async with self.engine.connect() as db:
            rows = (
                await db.execute(
                    select(invoices)
                    .where(invoices.c.project_id == project_id)
                    .order_by(invoices.c.cycle_start)
                )
            ).all()
        return [
            StoredInvoice(
                r.invoice_id,
                Invoice(
                    PlanName(r.plan),
                    utc(r.cycle_start),
                    utc(r.cycle_end),
                    r.plan_price_micro_eur,
                    r.overage_credits,
                    r.overage_micro_eur,
                ),
                utc(r.created_at),
            )
            for r in rows
        ]

    async def raise_alert(
        self, project_id: str, kind: str, cycle_start: datetime, detail: str, at: datetime
    ) -> bool:
        """Record an alert once per project, kind and cycle; False when already raised."""
        try:
            async with self.engine.begin() as db:
                await db.execute(
                    insert(alerts).values(
                        alert_id=str(uuid.uuid4()),
                        project_id=project_id,
                        kind=kind,
                        cycle_start=cycle_start,
                        detail=detail,
                        created_at=at,
                    )
                )
        except IntegrityError:
            return False
        return True

    async def alerts(self, project_id: str) -> list[Alert]:
        async with self.engine.connect() as db:
            rows = (
                await db.execute(
                    select(alerts)
                    .where(alerts.c.project_id == project_id)
                    .order_by(alerts.c.created_at.desc())
                )
            ).all()
        return [
            Alert(r.alert_id, r.kind, utc(r.cycle_start), r.detail, utc(r.created_at)) for r in rows
        ]
