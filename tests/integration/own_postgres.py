"""A PostgreSQL cluster of a test's own, created with Debian's `pg_createcluster` on a free
port (trust authentication on the loopback) and dropped afterwards: the drills that stop and
restart PostgreSQL do it to this cluster, never to the one the rest of the suite shares
(test files run side by side, one per worker).

Without the Debian tools (or the rights to run them) the test is skipped loudly, except
under CI, where it fails."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import asyncpg
import pytest

from entryway.devnet.anvil import free_port

_CONFIGS = Path("/etc/postgresql")


@dataclass(frozen=True)
class Cluster:
    version: str
    name: str
    port: int

    @property
    def admin_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def database_url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def ctl(self, action: str) -> None:
        """`pg_ctlcluster VERSION NAME ACTION` (start, stop, restart), as an operator runs it."""
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", self.version, self.name, action],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip

    async def accepts(self, within: float = 60) -> None:
        """Return once the cluster takes a connection; raise if it has not `within` seconds."""
        deadline = time.monotonic() + within
        while True:
            try:
                conn = await asyncpg.connect(self.admin_url, timeout=2)
            except (OSError, asyncpg.PostgresError):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
            else:
                await conn.close()
                return

    async def accepting(self) -> bool:
        try:
            await self.accepts(within=1)
        except (OSError, asyncpg.PostgresError):
            return False
        return True


@contextmanager
def own_cluster(what: str) -> Iterator[Cluster]:
    """A started cluster of the newest installed PostgreSQL; `what` names the tier in the
    skip message."""
    versions = sorted(os.listdir(_CONFIGS)) if _CONFIGS.is_dir() else []
    if shutil.which("pg_createcluster") is None or not versions:
        _unavailable(f"Debian's PostgreSQL cluster tools are not installed: {what} SKIPPED")
    cluster = Cluster(versions[-1], f"entryway_{secrets.token_hex(4)}", free_port())
    created = subprocess.run(
        ["pg_createcluster", cluster.version, cluster.name, "-p", str(cluster.port),
         "--start-conf", "manual", "--", "--auth=trust"],
        check=False, capture_output=True, timeout=120,
    )  # fmt: skip
    if created.returncode != 0:
        reason = created.stderr.decode(errors="replace").strip()
        _unavailable(f"pg_createcluster failed ({reason}): {what} SKIPPED")
    try:
        cluster.ctl("start")
        yield cluster
    finally:
        subprocess.run(
            ["pg_dropcluster", "--stop", cluster.version, cluster.name],
            check=False, capture_output=True, timeout=120,
        )  # fmt: skip


def _unavailable(message: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        raise AssertionError(message)
    pytest.skip(f"!!! {message} !!!")
