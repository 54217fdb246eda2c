"""Dashboard accounts in a real database (SQLite and PostgreSQL): users, server-side
sessions, memberships and invitation links."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.accounts import (
    SESSION_IDLE,
    SESSION_LIFETIME,
    AccountError,
    ProjectRole,
)
from entryway.domain.plans import PlanName
from entryway.storage.accounts import INVITATION_LIFETIME, AccountStore, digest
from entryway.storage.schema import dashboard_sessions, invitations
from entryway.storage.store import Store

NOW = datetime(2026, 11, 24, 9, tzinfo=UTC)
HASH = "$argon2id$v=19$m=65536,t=3,p=4$c29tZXNhbHQ$RdescudvJCsgt3ub+b+dWRWJTmaaJObG"


async def user(store: AccountStore, name: str) -> str:
    return await store.sign_up(f"{name}@example.com", HASH, NOW)


async def project(engine: AsyncEngine, owner_id: str) -> str:
    return await Store(engine).create_project(owner_id, "demo", PlanName.FREE, [80002], NOW)


async def test_sign_up_refuses_an_email_already_known(engine: AsyncEngine) -> None:
    store = AccountStore(engine)
    alice = await user(store, "alice")
    with pytest.raises(AccountError, match="already exists"):
        await store.sign_up("alice@example.com", HASH, NOW)
    await Store(engine).create_user("named@example.com", NOW)  # by the operator API
    with pytest.raises(AccountError, match="already exists"):
        await store.sign_up("named@example.com", HASH, NOW)
    found = await store.user_by_email("alice@example.com")
    assert found is not None and found.user_id == alice and found.password_hash == HASH
    assert not found.is_operator
    assert await store.user_by_email("nobody@example.com") is None


async def test_only_the_digest_of_a_session_is_stored(engine: AsyncEngine) -> None:
    store = AccountStore(engine)
    alice = await user(store, "alice")
    secret, opened = await store.open_session(alice, operator=False, at=NOW)
    async with engine.connect() as db:
        kept = (await db.execute(select(dashboard_sessions.c.session_digest))).scalars().all()
    assert kept == [digest(secret)] and secret not in kept
    assert opened.email == "alice@example.com" and opened.expires_at == NOW + SESSION_IDLE
    found = await store.session(secret, NOW)
    assert found is not None and found.user_id == alice and not found.operator
    assert found.csrf_token == opened.csrf_token
    assert await store.session(digest(secret), NOW) is None  # the digest opens nothing


async def test_a_session_ends_when_idle_and_use_keeps_it_alive(engine: AsyncEngine) -> None:
    store = AccountStore(engine)
    alice = await user(store, "alice")
    idle, _ = await store.open_session(alice, operator=False, at=NOW)
    used, _ = await store.open_session(alice, operator=False, at=NOW)
    halfway = NOW + SESSION_IDLE / 2
    kept = await store.session(used, halfway)
    assert kept is not None and kept.expires_at == halfway + SESSION_IDLE
    later = NOW + SESSION_IDLE + timedelta(seconds=1)
    assert await store.session(idle, later) is None
    assert await store.session(idle, NOW) is None  # deleted, not just hidden
    assert await store.session(used, later) is not None


async def test_a_session_ends_after_its_lifetime_however_much_it_is_used(
    engine: AsyncEngine,
) -> None:
    store = AccountStore(engine)
    alice = await user(store, "alice")
    secret, _ = await store.open_session(alice, operator=False, at=NOW)
    at = NOW
    while at + SESSION_IDLE / 2 < NOW + SESSION_LIFETIME:
        at += SESSION_IDLE / 2
        assert await store.session(secret, at) is not None, at
    assert await store.session(secret, NOW + SESSION_LIFETIME) is None


async def test_a_closed_session_is_gone(engine: AsyncEngine) -> None:
    store = AccountStore(engine)
    alice = await user(store, "alice")
    secret, _ = await store.open_session(alice, operator=False, at=NOW)
    other, _ = await store.open_session(alice, operator=False, at=NOW)
    await store.close_session(secret)
    assert await store.session(secret, NOW) is None
    assert await store.session(other, NOW) is not None


async def test_signing_in_clears_sessions_that_expired(engine: AsyncEngine) -> None:
    store = AccountStore(engine)
    alice = await user(store, "alice")
    await store.open_session(alice, operator=False, at=NOW)
    await store.open_session(None, operator=True, at=NOW + SESSION_IDLE + timedelta(days=1))
    async with engine.connect() as db:
        left = (await db.execute(select(dashboard_sessions.c.user_id))).scalars().all()
    assert left == [None]


async def test_a_new_password_ends_that_users_sessions_only(engine: AsyncEngine) -> None:
    store = AccountStore(engine)
    alice, bob = await user(store, "alice"), await user(store, "bob")
    first, _ = await store.open_session(alice, operator=False, at=NOW)
    second, _ = await store.open_session(alice, operator=False, at=NOW)
    bobs, _ = await store.open_session(bob, operator=False, at=NOW)
    operators, _ = await store.open_session(None, operator=True, at=NOW)
    await store.set_password(alice, "$argon2id$new")
    assert await store.session(first, NOW) is None
    assert await store.session(second, NOW) is None
    assert await store.session(bobs, NOW) is not None
    assert await store.session(operators, NOW) is not None
    found = await store.user(alice)
    assert found is not None and found.password_hash == "$argon2id$new"


async def test_members_and_the_last_owner(engine: AsyncEngine) -> None:
    store = AccountStore(engine)
    alice, bob = await user(store, "alice"), await user(store, "bob")
    carol = await user(store, "carol")
    mine = await project(engine, alice)
    theirs = await project(engine, carol)
    later = NOW + timedelta(minutes=1)
    await store.add_member(mine, bob, ProjectRole.MEMBER, later)
    await store.add_member(mine, bob, ProjectRole.OWNER, later)  # a member already: unchanged
    assert await store.role(mine, alice) is ProjectRole.OWNER
    assert await store.role(mine, bob) is ProjectRole.MEMBER
    assert await store.role(mine, carol) is None
    assert await store.project_ids(bob) == [mine]
    assert await store.project_ids(carol) == [theirs]
    assert [(m.email, m.role) for m in await store.members(mine)] == [
        ("alice@example.com", ProjectRole.OWNER),
        ("bob@example.com", ProjectRole.MEMBER),
    ]
    with pytest.raises(AccountError, match="at least one owner"):
        await store.remove_member(mine, alice)
    await store.remove_member(mine, bob)
    assert await store.project_ids(bob) == []
    await store.add_member(mine, bob, ProjectRole.OWNER, NOW)
    await store.remove_member(mine, alice)  # another owner is left
    assert [m.user_id for m in await store.members(mine)] == [bob]


async def test_an_invitation_link_works_once(engine: AsyncEngine) -> None:
    store = AccountStore(engine)
    alice, bob = await user(store, "alice"), await user(store, "bob")
    mine = await project(engine, alice)
    token = await store.invite(mine, "bob@example.com", ProjectRole.MEMBER, alice, NOW)
    async with engine.connect() as db:
        kept = (await db.execute(select(invitations.c.invitation_digest))).scalars().all()
    assert kept == [digest(token)]
    [shown] = await store.invitations(mine)
    assert (shown.email, shown.role, shown.accepted) == (
        "bob@example.com",
        ProjectRole.MEMBER,
        False,
    )
    assert shown.expires_at == NOW + INVITATION_LIFETIME
    assert await store.accept_invitation(token, bob, NOW) == mine
    assert await store.role(mine, bob) is ProjectRole.MEMBER
    assert [i.accepted for i in await store.invitations(mine)] == [True]
    with pytest.raises(AccountError, match="unknown, used or expired"):
        await store.accept_invitation(token, bob, NOW)


async def test_an_invitation_link_expires_and_an_unknown_one_opens_nothing(
    engine: AsyncEngine,
) -> None:
    store = AccountStore(engine)
    alice, bob = await user(store, "alice"), await user(store, "bob")
    mine = await project(engine, alice)
    token = await store.invite(mine, "bob@example.com", ProjectRole.OWNER, alice, NOW)
    with pytest.raises(AccountError, match="unknown, used or expired"):
        await store.accept_invitation(token, bob, NOW + INVITATION_LIFETIME)
    with pytest.raises(AccountError, match="unknown, used or expired"):
        await store.accept_invitation(token + "x", bob, NOW)
    with pytest.raises(AccountError, match="unknown, used or expired"):
        await store.accept_invitation(digest(token), bob, NOW)  # the stored digest is no link
    assert await store.role(mine, bob) is None
    assert await store.accept_invitation(token, bob, NOW + INVITATION_LIFETIME / 2) == mine
    assert await store.role(mine, bob) is ProjectRole.OWNER


async def test_an_invitation_opens_the_project_to_the_invited_address_only(
    engine: AsyncEngine,
) -> None:
    store = AccountStore(engine)
    alice, bob = await user(store, "alice"), await user(store, "bob")
    mallory = await user(store, "mallory")
    mine = await project(engine, alice)
    token = await store.invite(mine, "bob@example.com", ProjectRole.MEMBER, alice, NOW)
    with pytest.raises(AccountError, match="for another email address"):
        await store.accept_invitation(token, mallory, NOW)
    assert await store.role(mine, mallory) is None
    assert await store.accept_invitation(token, bob, NOW) == mine  # still unused


async def test_the_operator_role_is_granted_and_taken_back_by_email(engine: AsyncEngine) -> None:
    store = AccountStore(engine)
    alice = await user(store, "alice")
    secret, _ = await store.open_session(alice, operator=False, at=NOW)
    assert await store.set_operator("alice@example.com", True)
    found = await store.user(alice)
    assert found is not None and found.is_operator
    session = await store.session(secret, NOW)
    assert session is not None and session.operator  # at once, in sessions already open
    assert await store.set_operator("alice@example.com", False)
    session = await store.session(secret, NOW)
    assert session is not None and not session.operator
    assert not await store.set_operator("nobody@example.com", True)
    operators, _ = await store.open_session(None, operator=True, at=NOW)
    session = await store.session(operators, NOW)
    assert session is not None and session.operator and session.user_id is None


async def test_an_invitation_lets_only_its_passwordless_addressee_set_a_password(
    engine: AsyncEngine,
) -> None:
    accounts = AccountStore(engine)
    store = Store(engine)
    named = await store.create_user("named@example.org", NOW)  # the operator API's owner
    project_id = await project(engine, named)
    token = await accounts.invite(project_id, "named@example.org", ProjectRole.OWNER, None, NOW)
    other = await accounts.invite(project_id, "else@example.org", ProjectRole.MEMBER, None, NOW)

    assert await accounts.claim_by_invitation(other, "named@example.org", "h1", NOW) is None
    assert await accounts.claim_by_invitation("nope", "named@example.org", "h1", NOW) is None
    late = NOW + INVITATION_LIFETIME
    assert await accounts.claim_by_invitation(token, "named@example.org", "h1", late) is None
    assert await accounts.claim_by_invitation(token, "named@example.org", "h2", NOW) == named
    found = await accounts.user(named)
    assert found is not None and found.password_hash == "h2"
    # Once it has a password, no link sets another.
    assert await accounts.claim_by_invitation(token, "named@example.org", "h3", NOW) is None
    found = await accounts.user(named)
    assert found is not None and found.password_hash == "h2"
