"""Files at rest: the data directory 0700 and the database, keys and tokens 0600, made so
under the common umask 022, and narrowed when an earlier install left them wider."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from entryway.devnet.devnet import Devnet
from entryway.storage.private_files import (
    prepare_sqlite_file,
    private_directory,
    sqlite_path,
    write_private_file,
)

pytestmark = pytest.mark.usefixtures("usual_umask")


@pytest.fixture
def usual_umask() -> Iterator[None]:
    before = os.umask(0o022)
    yield
    os.umask(before)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_data_directory_is_made_0700_with_its_missing_parents(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    data = private_directory(tmp_path / "srv" / "entryway")
    assert (mode(data), mode(data.parent)) == (0o700, 0o700)
    assert mode(tmp_path) == 0o755  # a parent that was there is not ours to change


def test_an_existing_data_directory_is_narrowed_never_widened(tmp_path: Path) -> None:
    wide, narrow = tmp_path / "wide", tmp_path / "narrow"
    wide.mkdir(mode=0o777)
    wide.chmod(0o775)
    narrow.mkdir()
    narrow.chmod(0o500)
    private_directory(wide)
    private_directory(narrow)
    assert (mode(wide), mode(narrow)) == (0o700, 0o500)


def test_a_private_file_is_0600_from_its_first_byte_and_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "token"
    assert write_private_file(path, "first\n")
    assert mode(path) == 0o600
    assert not write_private_file(path, "second\n")
    assert path.read_text() == "first\n"


def test_the_sqlite_file_is_made_0600_and_wider_companions_are_narrowed(tmp_path: Path) -> None:
    db = tmp_path / "entryway.sqlite3"
    wal = tmp_path / "entryway.sqlite3-wal"
    wal.write_bytes(b"")
    wal.chmod(0o644)
    prepare_sqlite_file(db)
    assert (mode(db), mode(wal)) == (0o600, 0o600)
    db.chmod(0o664)
    prepare_sqlite_file(db)
    assert mode(db) == 0o600


def test_only_file_databases_have_a_path() -> None:
    assert sqlite_path("sqlite+aiosqlite:////srv/e/entryway.sqlite3") == Path(
        "/srv/e/entryway.sqlite3"
    )
    for url in (
        "sqlite+aiosqlite://",
        "sqlite+aiosqlite:///:memory:",
        "postgresql+asyncpg://u@h/db",
    ):
        assert sqlite_path(url) is None


def test_the_devnet_keeps_its_operator_keys_in_private_directories(tmp_path: Path) -> None:
    Devnet(tmp_path / "data", [80002])  # made, not started: the keys exist already
    keys = tmp_path / "data" / "devnet" / "keys"
    assert mode(tmp_path / "data") == mode(keys.parent) == mode(keys) == 0o700
    assert {p.name: mode(p) for p in keys.iterdir()} == {
        name: 0o600
        for name in (
            "operator.key",
            "paymaster-signer.key",
            "notary-submitter.key",
            "bundler-executor.key",
            "bundler-executor-2.key",
            "bundler-executor-3.key",
            "bundler-executor-4.key",
        )
    }
