"""Recoveries in the database (implements `wallets.ports.RecoveryRepository`).

A recovery moves by compare-and-set on its state: `save` writes it only if it is still in the
state the caller read, so two workers (or a worker and a request) never both advance it; a
task that goes with a state change is enqueued in the same transaction.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sqlalchemy import Row, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from entryway.domain.evm import hex_to_bytes, to_hex
from entryway.storage.schema import wallet_recoveries, wallet_recovery_approvals
from entryway.storage.tasks import TaskQueue, as_utc, insert_unless_exists
from entryway.wallets.ports import ScheduledTask
from entryway.wallets.recovery import (
    FINAL_STATES,
    Approval,
    Recovery,
    RecoveryState,
    Step,
)

_STEPS = ("start", "finalize")


class _MovedError(Exception):
    """The recovery left the expected state: roll the transaction back."""


def _columns(recovery: Recovery) -> dict[str, Any]:
    """The row's mutable columns."""
    values: dict[str, Any] = {
        "state": recovery.state.value,
        "execute_after": recovery.execute_after,
        "failure_reason": recovery.failure_reason,
        "updated_at": recovery.updated_at,
    }
    for name in _STEPS:
        step = recovery.step(name)
        values |= {
            f"{name}_task_id": step.task_id,
            f"{name}_user_op_hash": step.user_op_hash,
            f"{name}_submission": step.submission,
            f"{name}_tx_hash": step.transaction_hash,
        }
    return values


def _step(row: Row[Any], name: str) -> Step:
    return Step(
        task_id=getattr(row, f"{name}_task_id"),
        user_op_hash=getattr(row, f"{name}_user_op_hash"),
        submission=getattr(row, f"{name}_submission"),
        transaction_hash=getattr(row, f"{name}_tx_hash"),
    )


def _recovery(row: Row[Any], approvals: tuple[Approval, ...]) -> Recovery:
    return Recovery(
        recovery_id=row.recovery_id,
        project_id=row.project_id,
        key_id=row.key_id,
        chain_id=int(row.chain_id),
        account=row.account,
        new_owner=row.new_owner,
        recovery_nonce=int(row.recovery_nonce),
        threshold=int(row.threshold),
        guardians=tuple(g for g in row.guardians.split(",") if g),
        state=RecoveryState(row.state),
        created_at=as_utc(row.created_at),
        updated_at=as_utc(row.updated_at),
        approvals=approvals,
        start=_step(row, "start"),
        finalize=_step(row, "finalize"),
        execute_after=None if row.execute_after is None else int(row.execute_after),
        failure_reason=row.failure_reason,
    )


class RecoveryStore:
    def __init__(self, engine: AsyncEngine, *, queue: TaskQueue | None = None) -> None:
        self.engine = engine
        self.queue = queue or TaskQueue(engine)

    async def create(self, recovery: Recovery) -> None:
        async with self.engine.begin() as db:
            await db.execute(
                insert(wallet_recoveries).values(
                    recovery_id=recovery.recovery_id,
                    project_id=recovery.project_id,
                    key_id=recovery.key_id,
                    chain_id=recovery.chain_id,
                    account=recovery.account,
                    new_owner=recovery.new_owner,
                    recovery_nonce=recovery.recovery_nonce,
                    threshold=recovery.threshold,
                    guardians=",".join(recovery.guardians),
                    created_at=recovery.created_at,
                    **_columns(recovery),
                )
            )
            for approval in recovery.approvals:
                await self._add_approval(db, recovery.recovery_id, approval)

    async def get(self, recovery_id: str, project_id: str | None = None) -> Recovery | None:
        query = select(wallet_recoveries).where(wallet_recoveries.c.recovery_id == recovery_id)
        if project_id is not None:
            query = query.where(wallet_recoveries.c.project_id == project_id)
        async with self.engine.connect() as db:
            row = (await db.execute(query)).one_or_none()
            return None if row is None else await self._with_approvals(db, row)

    async def open_for(self, project_id: str, chain_id: int, account: str) -> Recovery | None:
        query = (
            select(wallet_recoveries)
            .where(
                wallet_recoveries.c.project_id == project_id,
                wallet_recoveries.c.chain_id == chain_id,
                wallet_recoveries.c.account == account,
                wallet_recoveries.c.state.not_in([s.value for s in FINAL_STATES]),
            )
            .order_by(wallet_recoveries.c.created_at.desc())
            .limit(1)
        )
        async with self.engine.connect() as db:
            row = (await db.execute(query)).one_or_none()
            return None if row is None else await self._with_approvals(db, row)

    async def add_approval(self, recovery_id: str, approval: Approval) -> None:
        async with self.engine.begin() as db:
            await self._add_approval(db, recovery_id, approval)

    async def save(
        self, recovery: Recovery, *, expected: RecoveryState, task: ScheduledTask | None = None
    ) -> Recovery | None:
        try:
            async with self.engine.begin() as db:
                return await self._save(db, recovery, expected, task)
        except _MovedError:
            return None

    async def _save(
        self,
        db: AsyncConnection,
        recovery: Recovery,
        expected: RecoveryState,
        task: ScheduledTask | None,
    ) -> Recovery:
        if task is not None:
            task_id = await self.queue.enqueue_in(
                db,
                task.kind,
                {"recoveryId": recovery.recovery_id},
                project_id=recovery.project_id,
                run_at=task.run_at,
                idempotency_key=recovery.recovery_id,
                max_attempts=task.max_attempts,
            )
            step = recovery.step(task.step)
            recovery = recovery.with_step(task.step, replace(step, task_id=task_id))
        done = await db.execute(
            update(wallet_recoveries)
            .where(
                wallet_recoveries.c.recovery_id == recovery.recovery_id,
                wallet_recoveries.c.state == expected.value,
            )
            .values(**_columns(recovery))
        )
        if done.rowcount != 1:
            raise _MovedError  # the task goes with the change, or not at all
        row = (
            await db.execute(
                select(wallet_recoveries).where(
                    wallet_recoveries.c.recovery_id == recovery.recovery_id
                )
            )
        ).one()
        return await self._with_approvals(db, row)

    # ------------------------------------------------------------------ helpers

    @staticmethod
    async def _add_approval(db: AsyncConnection, recovery_id: str, approval: Approval) -> None:
        key = (
            wallet_recovery_approvals.c.recovery_id == recovery_id,
            wallet_recovery_approvals.c.guardian == approval.guardian,
        )
        signature = to_hex(approval.signature)
        replaced = await db.execute(
            update(wallet_recovery_approvals).where(*key).values(signature=signature)
        )
        if replaced.rowcount == 0:
            values = {
                "recovery_id": recovery_id,
                "guardian": approval.guardian,
                "signature": signature,
                "created_at": approval.created_at,
            }
            await insert_unless_exists(
                db, wallet_recovery_approvals, values, ("recovery_id", "guardian")
            )

    @staticmethod
    async def _with_approvals(db: AsyncConnection, row: Row[Any]) -> Recovery:
        rows = await db.execute(
            select(wallet_recovery_approvals)
            .where(wallet_recovery_approvals.c.recovery_id == row.recovery_id)
            .order_by(wallet_recovery_approvals.c.created_at, wallet_recovery_approvals.c.guardian)
        )
        approvals = tuple(
            Approval(a.guardian, hex_to_bytes(a.signature), as_utc(a.created_at)) for a in rows
        )
        return _recovery(row, approvals)
