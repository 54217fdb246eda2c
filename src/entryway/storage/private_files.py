"""Files only the service's own user may read: the data directory (0700), and the database,
keys and tokens in it (0600).

Modes are set when a file is made, with an explicit chmod where the process umask could leave
more open, and an existing file or directory with looser modes is narrowed at start, so an
install made before this rule, or by hand, is put right.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sqlalchemy.engine import make_url

DIRECTORY_MODE = 0o700
FILE_MODE = 0o600
# SQLite's companions of a database file: the WAL, its shared-memory index, the rollback journal.
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


def narrow(path: Path, mode: int) -> None:
    """Drop the permission bits of `path` that `mode` does not grant (never adds any)."""
    current = stat.S_IMODE(path.stat().st_mode)
    if current & ~mode:
        path.chmod(current & mode)


def private_directory(path: Path) -> Path:
    """`path` as a directory only its owner can use: made 0700 (with any missing parents), or
    narrowed to 0700 when it exists. Existing parents are left as they are."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    path.mkdir(mode=DIRECTORY_MODE, parents=True, exist_ok=True)
    for made in missing:
        made.chmod(DIRECTORY_MODE)  # mkdir's mode passes through the umask; parents ignore it
    narrow(path, DIRECTORY_MODE)
    return path


def write_private_file(path: Path, text: str) -> bool:
    """Write `text` to a new file made 0600 from the start (no moment of wider access); False,
    writing nothing, if the file exists already."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return True


def sqlite_path(url: str) -> Path | None:
    """The database file a SQLite URL names; None for other databases and in-memory ones."""
    parsed = make_url(url)
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database:
        return None
    if database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database)


def prepare_sqlite_file(path: Path) -> None:
    """Make the database file 0600 before SQLite opens it (SQLite gives its WAL and shared-memory
    files the database's mode), and narrow the modes of files an earlier run left wider."""
    if not path.parent.is_dir():
        return  # SQLite reports the missing directory when it connects, as it always did
    if not path.exists():
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, FILE_MODE))
    for file in (path, *(path.with_name(path.name + s) for s in SQLITE_COMPANIONS)):
        if file.exists():
            narrow(file, FILE_MODE)
