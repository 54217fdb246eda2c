"""`entryway operator grant|revoke EMAIL` as an operator runs it: against an `entryway up` data
directory (SQLite) and against a settings file naming PostgreSQL. The role holds for the
user's open dashboard session at once."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.storage.accounts import AccountStore
from entryway.storage.engine import make_engine, migrate, sqlite_url
from tests.integration.postgres import fresh_database

ENTRYWAY = str(Path(sys.executable).with_name("entryway"))
NOW = datetime.now(UTC)


def operator_command(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ENTRYWAY, "operator", *args], capture_output=True, text=True, timeout=60, check=False
    )


async def signed_in(engine: AsyncEngine, email: str) -> tuple[AccountStore, str]:
    """A user with an open session; the session's cookie secret."""
    accounts = AccountStore(engine)
    user_id = await accounts.sign_up(email, "argon2-hash-of-a-password", NOW)
    secret, session = await accounts.open_session(user_id, operator=False, at=NOW)
    assert not session.operator
    return accounts, secret


async def is_operator(accounts: AccountStore, secret: str) -> bool:
    session = await accounts.session(secret, datetime.now(UTC))
    assert session is not None
    return session.operator


async def test_grant_and_revoke_on_a_data_directory(tmp_path: Path) -> None:
    engine = make_engine(sqlite_url(tmp_path))
    await migrate(engine)
    try:
        accounts, secret = await signed_in(engine, "dana@example.com")
        where = ("--data-dir", str(tmp_path))

        done = operator_command("grant", " Dana@Example.com ", *where)
        assert done.returncode == 0, done.stderr
        assert "dana@example.com is now an operator" in done.stdout
        assert await is_operator(accounts, secret)  # the open session, without signing in again

        done = operator_command("revoke", "dana@example.com", *where)
        assert done.returncode == 0, done.stderr
        assert not await is_operator(accounts, secret)

        done = operator_command("grant", "nobody@example.com", *where)
        assert done.returncode == 1
        assert "no user has the email nobody@example.com" in done.stderr
    finally:
        await engine.dispose()


def test_a_directory_without_a_database_is_named_and_left_alone(tmp_path: Path) -> None:
    missing = tmp_path / "not-a-data-dir"
    done = operator_command("grant", "dana@example.com", "--data-dir", str(missing))
    assert done.returncode == 2
    assert f"no database in {missing}" in done.stderr
    assert not missing.exists()


async def test_grant_through_a_settings_file_naming_postgresql(tmp_path: Path) -> None:
    async with fresh_database("the operator command on PostgreSQL") as (url, _):
        engine = make_engine(url)
        await migrate(engine)
        try:
            accounts, secret = await signed_in(engine, "erin@example.com")
            config = tmp_path / "entryway.toml"
            config.write_text(f'database_url = "{url}"\n')
            done = operator_command("grant", "erin@example.com", "--config", str(config))
            assert done.returncode == 0, done.stderr
            assert await is_operator(accounts, secret)
        finally:
            await engine.dispose()
