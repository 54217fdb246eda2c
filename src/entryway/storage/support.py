"""Support requests in the database: filed by a signed-in user (about one of their projects
or none) under the support level it is owed, listed for their author, queued for the operator
(SLA first, then priority, then community; oldest first within a level) and answered by them.

An answer is given once: the row moves from open to answered under a condition on its status,
so two operators answering at the same moment cannot overwrite each other. An overdue request
is noted once in the same way, so that its alert is raised by one process only."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import and_, case, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.plans import SupportLevel
from entryway.domain.support import LEVEL_RANK, RequestStatus, SupportTopic, in_queue_order
from entryway.errors import EntrywayError
from entryway.storage.apikeys import utc
from entryway.storage.schema import projects, support_requests, users

LIST_LIMIT = 200


class UnknownSupportRequestError(EntrywayError):
    """No such support request."""


class AlreadyAnsweredError(EntrywayError):
    """The request has an answer already."""


@dataclass(frozen=True, slots=True)
class SupportRequest:
    request_id: str
    project_id: str | None
    project_name: str | None
    user_id: str
    email: str
    topic: SupportTopic
    message: str
    status: RequestStatus
    created_at: datetime
    details: dict[str, Any] = field(default_factory=dict)  # the topic's own fields
    answer: str | None = None
    answered_at: datetime | None = None
    level: SupportLevel = SupportLevel.COMMUNITY
    answered_by: str | None = None  # the operator's email, or "operator token"
    overdue_noted_at: datetime | None = None


def _request(r: Any) -> SupportRequest:
    return SupportRequest(
        request_id=r.request_id,
        project_id=r.project_id,
        project_name=r.name,
        user_id=r.user_id,
        email=r.email,
        topic=SupportTopic(r.topic),
        message=r.message,
        status=RequestStatus(r.status),
        created_at=utc(r.created_at),
        details=json.loads(r.details) if r.details else {},
        answer=r.answer,
        answered_at=utc(r.answered_at) if r.answered_at else None,
        level=SupportLevel(r.support_level),
        answered_by=r.answered_by,
        overdue_noted_at=utc(r.overdue_noted_at) if r.overdue_noted_at else None,
    )


_LISTED = (
    select(support_requests, users.c.email, projects.c.name)
    .select_from(
        support_requests.join(users, users.c.user_id == support_requests.c.user_id).outerjoin(
            projects, projects.c.project_id == support_requests.c.project_id
        )
    )
    .order_by(support_requests.c.created_at.desc())
)

_LEVEL_RANK = case(
    {level.value: rank for level, rank in LEVEL_RANK.items()},
    value=support_requests.c.support_level,
    else_=len(LEVEL_RANK),
)


class SupportRequests:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def file(
        self,
        user_id: str,
        project_id: str | None,
        topic: SupportTopic,
        message: str,
        details: dict[str, Any] | None,
        at: datetime,
        level: SupportLevel = SupportLevel.COMMUNITY,
    ) -> str:
        """A new open request owed `level`; its id. The caller has checked the user may name
        the project and chosen the level (`domain.support.level_for`)."""
        request_id = str(uuid.uuid4())
        async with self.engine.begin() as db:
            await db.execute(
                insert(support_requests).values(
                    request_id=request_id,
                    project_id=project_id,
                    user_id=user_id,
                    topic=topic.value,
                    message=message,
                    details=json.dumps(details, sort_keys=True) if details else None,
                    status=RequestStatus.OPEN.value,
                    created_at=at,
                    support_level=level.value,
                )
            )
        return request_id

    async def of_user(self, user_id: str) -> list[SupportRequest]:
        """The user's own requests, newest first."""
        query = _LISTED.where(support_requests.c.user_id == user_id).limit(LIST_LIMIT)
        async with self.engine.connect() as db:
            return [_request(r) for r in await db.execute(query)]

    async def listed(self, status: RequestStatus) -> list[SupportRequest]:
        """Every user's requests in `status`, newest first (the operator's view)."""
        query = _LISTED.where(support_requests.c.status == status.value).limit(LIST_LIMIT)
        async with self.engine.connect() as db:
            return [_request(r) for r in await db.execute(query)]

    async def queue(self) -> list[SupportRequest]:
        """The open requests in the order the operator answers them: SLA first, then
        priority, then community, the oldest first within a level
        (`domain.support.in_queue_order`, here in SQL so the limit keeps the first)."""
        query = (
            _LISTED.where(support_requests.c.status == RequestStatus.OPEN.value)
            .order_by(None)
            .order_by(_LEVEL_RANK, support_requests.c.created_at, support_requests.c.request_id)
            .limit(LIST_LIMIT)
        )
        async with self.engine.connect() as db:
            return in_queue_order([_request(r) for r in await db.execute(query)])

    async def open_filed_before(
        self, cutoffs: Mapping[SupportLevel, datetime]
    ) -> list[SupportRequest]:
        """The open requests of each level filed before that level's cutoff, in queue order:
        the overdue ones, given `ResponseTargets.filed_before` (none left out by a limit, so
        that every overdue request is counted)."""
        late = or_(
            *(
                and_(
                    support_requests.c.support_level == level.value,
                    support_requests.c.created_at < cutoff,
                )
                for level, cutoff in cutoffs.items()
            )
        )
        query = _LISTED.where(
            and_(support_requests.c.status == RequestStatus.OPEN.value, late)
        ).order_by(None)
        async with self.engine.connect() as db:
            return in_queue_order([_request(r) for r in await db.execute(query)])

    async def note_overdue(self, request_id: str, at: datetime) -> bool:
        """Mark an open request as noted overdue; False when it was noted already (by this
        process or another) or has been answered meanwhile."""
        async with self.engine.begin() as db:
            done = await db.execute(
                update(support_requests)
                .where(
                    and_(
                        support_requests.c.request_id == request_id,
                        support_requests.c.status == RequestStatus.OPEN.value,
                        support_requests.c.overdue_noted_at.is_(None),
                    )
                )
                .values(overdue_noted_at=at)
            )
        return bool(done.rowcount)

    async def get(self, request_id: str) -> SupportRequest:
        query = _LISTED.where(support_requests.c.request_id == request_id)
        async with self.engine.connect() as db:
            row = (await db.execute(query)).one_or_none()
        if row is None:
            raise UnknownSupportRequestError(f"no support request {request_id}")
        return _request(row)

    async def answer(
        self, request_id: str, answer: str, at: datetime, *, by: str
    ) -> SupportRequest:
        """Answer an open request (once), as `by` (the operator's email, or the token)."""
        async with self.engine.begin() as db:
            done = await db.execute(
                update(support_requests)
                .where(
                    and_(
                        support_requests.c.request_id == request_id,
                        support_requests.c.status == RequestStatus.OPEN.value,
                    )
                )
                .values(
                    status=RequestStatus.ANSWERED.value,
                    answer=answer,
                    answered_at=at,
                    answered_by=by,
                )
            )
        if not done.rowcount:
            found = await self.get(request_id)  # raises when there is no such request
            if found.status is RequestStatus.ANSWERED:
                raise AlreadyAnsweredError("This request has been answered already.")
        return await self.get(request_id)
