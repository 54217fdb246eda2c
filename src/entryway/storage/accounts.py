"""Dashboard accounts in the database: users with their password hashes, server-side
sessions, memberships and invitation links. Passwords are hashed by the
caller (`dashboard.passwords`); session ids and invitation tokens are kept only as SHA-256
digests, so a copy of the database opens no browser session and no invitation."""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.accounts import (
    AccountError,
    ProjectRole,
    session_expiry,
)
from entryway.storage.apikeys import utc
from entryway.storage.schema import (
    dashboard_sessions,
    invitations,
    memberships,
    projects,
    users,
)

INVITATION_LIFETIME = timedelta(days=7)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class User:
    user_id: str
    email: str
    password_hash: str | None
    is_operator: bool


@dataclass(frozen=True, slots=True)
class Session:
    """A signed-in browser: a user, or the operator signed in with the operator token."""

    user_id: str | None
    email: str | None
    operator: bool  # the operator token, or a user granted the operator role
    csrf_token: str
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class Member:
    user_id: str
    email: str
    role: ProjectRole


@dataclass(frozen=True, slots=True)
class Invitation:
    project_id: str
    email: str
    role: ProjectRole
    expires_at: datetime
    accepted: bool


def _user(r: Any) -> User:
    return User(r.user_id, r.email, r.password_hash, bool(r.is_operator))


class AccountStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    # ---------------------------------------------------------------- users

    async def sign_up(self, email: str, password_hash: str, at: datetime) -> str:
        """A new user. An email already known (signed up, or named by the operator API when
        it made a project) is refused: without a confirmed mailbox, taking over an account
        by its address alone would hand its projects to whoever typed it first."""
        user_id = str(uuid.uuid4())
        try:
            async with self.engine.begin() as db:
                await db.execute(
                    insert(users).values(
                        user_id=user_id, email=email, created_at=at, password_hash=password_hash
                    )
                )
        except IntegrityError as exc:
            raise AccountError(
                "An account with this email already exists. Sign in, or ask the operator."
            ) from exc
        return user_id

    async def claim_by_invitation(
        self, token: str, email: str, password_hash: str, at: datetime
    ) -> str | None:
        """Give a password to a user who has none (named by the operator API when it made a
        project) when they hold an open invitation link sent to that very address: the
        link, handed over by a project's owner or the operator, stands in for the confirmed
        mailbox. The user's id, or None when the link does not allow it."""
        async with self.engine.begin() as db:
            invitation = (
                await db.execute(
                    select(
                        invitations.c.email, invitations.c.accepted_at, invitations.c.expires_at
                    ).where(invitations.c.invitation_digest == digest(token))
                )
            ).one_or_none()
            if (
                invitation is None
                or invitation.accepted_at is not None
                or at >= utc(invitation.expires_at)
                or invitation.email != email
            ):
                return None
            user = (
                await db.execute(
                    select(users.c.user_id).where(
                        users.c.email == email, users.c.password_hash.is_(None)
                    )
                )
            ).one_or_none()
            if user is None:
                return None
            await db.execute(
                update(users)
                .where(users.c.user_id == user.user_id, users.c.password_hash.is_(None))
                .values(password_hash=password_hash)
            )
        return str(user.user_id)

    async def user_by_email(self, email: str) -> User | None:
        async with self.engine.connect() as db:
            row = (await db.execute(select(users).where(users.c.email == email))).one_or_none()
        return None if row is None else _user(row)

    async def user(self, user_id: str) -> User | None:
        async with self.engine.connect() as db:
            row = (await db.execute(select(users).where(users.c.user_id == user_id))).one_or_none()
        return None if row is None else _user(row)

    async def set_password(self, user_id: str, password_hash: str) -> None:
        """A new password ends every session of the user but none other."""
        async with self.engine.begin() as db:
            await db.execute(
                update(users).where(users.c.user_id == user_id).values(password_hash=password_hash)
            )
            await db.execute(
                delete(dashboard_sessions).where(dashboard_sessions.c.user_id == user_id)
            )

    async def set_operator(self, email: str, operator: bool) -> bool:
        """Grant or take back the operator role; False when no user has this email."""
        async with self.engine.begin() as db:
            done = await db.execute(
                update(users).where(users.c.email == email).values(is_operator=operator)
            )
        return bool(done.rowcount)

    # ---------------------------------------------------------------- sessions

    async def open_session(
        self, user_id: str | None, *, operator: bool, at: datetime
    ) -> tuple[str, Session]:
        """A new session: (the cookie's secret, the session)."""
        secret = secrets.token_urlsafe(32)
        csrf = secrets.token_urlsafe(32)
        async with self.engine.begin() as db:
            # Sessions that ended without a sign-out go when anyone signs in.
            await db.execute(
                delete(dashboard_sessions).where(dashboard_sessions.c.expires_at <= at)
            )
            await db.execute(
                insert(dashboard_sessions).values(
                    session_digest=digest(secret),
                    user_id=user_id,
                    operator=operator,
                    csrf_token=csrf,
                    created_at=at,
                    last_seen_at=at,
                    expires_at=session_expiry(at, at),
                )
            )
        email = None
        if user_id is not None:
            found = await self.user(user_id)
            email = found.email if found else None
        return secret, Session(user_id, email, operator, csrf, session_expiry(at, at))

    async def session(self, secret: str, at: datetime) -> Session | None:
        """The live session behind a cookie, its idle clock restarted; None when unknown or
        expired (an expired one is deleted)."""
        key = digest(secret)
        query = (
            select(dashboard_sessions, users.c.email, users.c.is_operator)
            .select_from(dashboard_sessions.outerjoin(users))
            .where(dashboard_sessions.c.session_digest == key)
        )
        async with self.engine.connect() as db:
            row = (await db.execute(query)).one_or_none()
        if row is None:
            return None
        expires = session_expiry(utc(row.created_at), at)
        if at >= utc(row.expires_at):
            await self.close_session(secret)
            return None
        if at - utc(row.last_seen_at) > timedelta(minutes=1):  # a write a minute at most
            async with self.engine.begin() as db:
                await db.execute(
                    update(dashboard_sessions)
                    .where(dashboard_sessions.c.session_digest == key)
                    .values(last_seen_at=at, expires_at=expires)
                )
        operator = bool(row.operator) or bool(row.is_operator)
        return Session(row.user_id, row.email, operator, row.csrf_token, expires)

    async def close_session(self, secret: str) -> None:
        async with self.engine.begin() as db:
            await db.execute(
                delete(dashboard_sessions).where(
                    dashboard_sessions.c.session_digest == digest(secret)
                )
            )

    # ---------------------------------------------------------------- projects

    async def add_member(
        self, project_id: str, user_id: str, role: ProjectRole, at: datetime
    ) -> None:
        async with self.engine.begin() as db:
            known = await db.scalar(
                select(memberships.c.role).where(
                    memberships.c.project_id == project_id, memberships.c.user_id == user_id
                )
            )
            if known is None:
                await db.execute(
                    insert(memberships).values(
                        project_id=project_id, user_id=user_id, role=role.value, created_at=at
                    )
                )

    async def role(self, project_id: str, user_id: str) -> ProjectRole | None:
        """The user's role in the project; None when they are not a member."""
        async with self.engine.connect() as db:
            found = await db.scalar(
                select(memberships.c.role).where(
                    memberships.c.project_id == project_id, memberships.c.user_id == user_id
                )
            )
        return None if found is None else ProjectRole(found)

    async def project_ids(self, user_id: str) -> list[str]:
        """The user's projects, oldest first."""
        query = (
            select(memberships.c.project_id)
            .join(projects, projects.c.project_id == memberships.c.project_id)
            .where(memberships.c.user_id == user_id)
            .order_by(projects.c.created_at, projects.c.project_id)
        )
        async with self.engine.connect() as db:
            return [str(p) for p in (await db.execute(query)).scalars()]

    async def members(self, project_id: str) -> list[Member]:
        query = (
            select(memberships.c.user_id, users.c.email, memberships.c.role)
            .join(users, users.c.user_id == memberships.c.user_id)
            .where(memberships.c.project_id == project_id)
            .order_by(memberships.c.created_at, users.c.email)
        )
        async with self.engine.connect() as db:
            rows = (await db.execute(query)).all()
        return [Member(r.user_id, r.email, ProjectRole(r.role)) for r in rows]

    async def remove_member(self, project_id: str, user_id: str) -> None:
        """Refused for the project's last owner: a project always has one."""
        async with self.engine.begin() as db:
            rows = (
                await db.execute(
                    select(memberships.c.user_id, memberships.c.role)
                    .where(memberships.c.project_id == project_id)
                    .with_for_update()
                )
            ).all()
            owners = {r.user_id for r in rows if r.role == ProjectRole.OWNER}
            if owners == {user_id}:
                raise AccountError("A project keeps at least one owner.")
            await db.execute(
                delete(memberships).where(
                    memberships.c.project_id == project_id, memberships.c.user_id == user_id
                )
            )

    async def invite(
        self,
        project_id: str,
        email: str,
        role: ProjectRole,
        invited_by: str | None,
        at: datetime,
    ) -> str:
        """An invitation link's token, valid for `INVITATION_LIFETIME`, for one use."""
        token = secrets.token_urlsafe(24)
        async with self.engine.begin() as db:
            await db.execute(
                insert(invitations).values(
                    invitation_digest=digest(token),
                    project_id=project_id,
                    email=email,
                    role=role.value,
                    invited_by=invited_by,
                    created_at=at,
                    expires_at=at + INVITATION_LIFETIME,
                )
            )
        return token

    async def invitations(self, project_id: str) -> list[Invitation]:
        query = (
            select(invitations)
            .where(invitations.c.project_id == project_id)
            .order_by(invitations.c.created_at)
        )
        async with self.engine.connect() as db:
            rows = (await db.execute(query)).all()
        return [
            Invitation(
                r.project_id,
                r.email,
                ProjectRole(r.role),
                utc(r.expires_at),
                r.accepted_at is not None,
            )
            for r in rows
        ]

    async def accept_invitation(self, token: str, user_id: str, at: datetime) -> str:
        """Join the invitation's project; its id. Each link works once, until it expires."""
        key = digest(token)
        async with self.engine.begin() as db:
            row = (
                await db.execute(
                    select(invitations)
                    .where(invitations.c.invitation_digest == key)
                    .with_for_update()
                )
            ).one_or_none()
            if row is None or row.accepted_at is not None or at >= utc(row.expires_at):
                raise AccountError("This invitation link is unknown, used or expired.")
            email = await db.scalar(select(users.c.email).where(users.c.user_id == user_id))
            if email != row.email:
                # The link goes by email: a copy forwarded or leaked opens no account but
                # the one invited.
                raise AccountError(
                    "This invitation is for another email address. Sign in as the person "
                    "invited to join."
                )
            await db.execute(
                update(invitations)
                .where(invitations.c.invitation_digest == key)
                .values(accepted_by=user_id, accepted_at=at)
            )
            known = await db.scalar(
                select(memberships.c.role).where(
                    memberships.c.project_id == row.project_id, memberships.c.user_id == user_id
                )
            )
            if known is None:
                await db.execute(
                    insert(memberships).values(
                        project_id=row.project_id, user_id=user_id, role=row.role, created_at=at
                    )
                )
        return str(row.project_id)
