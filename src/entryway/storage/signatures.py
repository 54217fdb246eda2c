"""Paymaster signatures in the database, and how far each chain's paymaster events are read.

`SignatureStore.record` keeps each signature the paymaster returns (project, chain,
EntryPoint, userOpHash, the hold it draws on, the op as signed) before the signature leaves
the service. The chain's paymaster event follower (`paymaster.chain_charges`) finds the
signature of each UserOperationEvent naming our paymaster here, charges its project, and
writes where the op was mined; the settler's sweep asks it whether a hold's signatures are
all dead (expired, and no event for them up to the chain's final block read).
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.userop_json import op_from_json, op_to_json
from entryway.paymaster.ports import EventCursor, IssuedSignature, StoredSignature
from entryway.storage.schema import paymaster_event_cursors, sponsorship_signatures
from entryway.storage.tasks import as_utc

_s = sponsorship_signatures.c
_c = paymaster_event_cursors.c


class SignatureStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def record(self, issued: IssuedSignature) -> None:
        """Insert once per chain and hash: the same op signed again (the same window) is
        the same signature."""
        row = {
            "signature_id": str(uuid.uuid4()),
            "chain_id": issued.chain_id,
            "entry_point": issued.entry_point,
            "user_op_hash": issued.user_op_hash.lower() if issued.user_op_hash else None,
            "sender": issued.op.sender.lower(),
            "nonce": str(issued.op.nonce),
            "project_id": issued.project_id,
            "hold_key": issued.hold_key,
            "user_op": json.dumps(op_to_json(issued.op)),
            "valid_until": issued.valid_until,
            "created_at": issued.at,
        }
        try:
            async with self.engine.begin() as db:
                await db.execute(insert(sponsorship_signatures).values(**row))
        except IntegrityError:
            if (
                issued.user_op_hash is None
                or await self.by_hash(issued.chain_id, issued.user_op_hash) is None
            ):
                raise

    async def by_hash(self, chain_id: int, user_op_hash: str) -> StoredSignature | None:
        async with self.engine.connect() as db:
            row = (
                await db.execute(
                    select(sponsorship_signatures).where(
                        _s.chain_id == chain_id, _s.user_op_hash == user_op_hash.lower()
                    )
                )
            ).one_or_none()
        return None if row is None else _stored(row)

    async def for_event(
        self, chain_id: int, user_op_hash: str, sender: str, nonce: int
    ) -> StoredSignature | None:
        """The signature a UserOperationEvent used: by its hash, else (an EIP-7702 op signed
        before its delegate was known) the newest hashless one for its sender and nonce."""
        found = await self.by_hash(chain_id, user_op_hash)
        if found is not None:
            return found
        async with self.engine.connect() as db:
            row = (
                await db.execute(
                    select(sponsorship_signatures)
                    .where(
                        _s.chain_id == chain_id,
                        _s.sender == sender.lower(),
                        _s.nonce == str(nonce),
                        _s.user_op_hash.is_(None),
                    )
                    .order_by(_s.created_at.desc())
                    .limit(1)
                )
            ).one_or_none()
        return None if row is None else _stored(row)

    async def mark_mined(
        self,
        signature_id: str,
        user_op_hash: str,
        block_number: int,
        transaction_hash: str,
        submitted_by: str,
    ) -> None:
        async with self.engine.begin() as db:
            await db.execute(
                update(sponsorship_signatures)
                .where(_s.signature_id == signature_id)
                .values(
                    user_op_hash=user_op_hash.lower(),
                    block_number=block_number,
                    transaction_hash=transaction_hash,
                    submitted_by=submitted_by,
                )
            )

    async def for_hold(self, project_id: str, hold_key: str) -> list[StoredSignature]:
        async with self.engine.connect() as db:
            rows = (
                await db.execute(
                    select(sponsorship_signatures).where(
                        _s.project_id == project_id, _s.hold_key == hold_key
                    )
                )
            ).all()
        return [_stored(r) for r in rows]

    async def project_signed(self, project_id: str, chain_id: int, user_op_hash: str) -> bool:
        """Whether the project was given the signature of this op."""
        found = await self.by_hash(chain_id, user_op_hash)
        return found is not None and found.project_id == project_id

    # ------------------------------------------------------------------ cursors

    async def cursor(self, chain_id: int) -> EventCursor | None:
        async with self.engine.connect() as db:
            row = (
                await db.execute(select(paymaster_event_cursors).where(_c.chain_id == chain_id))
            ).one_or_none()
        if row is None:
            return None
        return EventCursor(int(row.next_block), int(row.final_block), int(row.final_time))

    async def save_cursor(self, chain_id: int, cursor: EventCursor) -> None:
        values = {
            "next_block": cursor.next_block,
            "final_block": cursor.final_block,
            "final_time": cursor.final_time,
            "updated_at": datetime.now(UTC),
        }
        change = update(paymaster_event_cursors).where(_c.chain_id == chain_id).values(**values)
        try:
            async with self.engine.begin() as db:
                if not (await db.execute(change)).rowcount:
                    await db.execute(
                        insert(paymaster_event_cursors).values(chain_id=chain_id, **values)
                    )
        except IntegrityError:  # another process inserted it first: ours replaces it
            async with self.engine.begin() as db:
                await db.execute(change)


def _stored(r: Any) -> StoredSignature:
    """A row of `sponsorship_signatures`."""
    return StoredSignature(
        signature_id=r.signature_id,
        project_id=r.project_id,
        chain_id=int(r.chain_id),
        entry_point=r.entry_point,
        user_op_hash=r.user_op_hash,
        op=op_from_json(json.loads(r.user_op)),
        hold_key=r.hold_key,
        valid_until=int(r.valid_until),
        created_at=as_utc(r.created_at),
        block_number=None if r.block_number is None else int(r.block_number),
        transaction_hash=r.transaction_hash,
        submitted_by=r.submitted_by,
    )
