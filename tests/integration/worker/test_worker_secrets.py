"""The `entryway worker` process and the secrets key, on SQLite and PostgreSQL: without a key
it refuses to start, and with a key that is not the one the service sealed the signing
secrets with it stops at start with an error naming both keys' ids (never the keys)."""

from __future__ import annotations

import asyncio
import base64
import os
import sys

from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.destinations import PRIVATE_ALLOWED
from entryway.storage.secret_box import key_id
from entryway.storage.webhooks import WebhookStore
from tests.integration.webhooks.support import SECRETS, SECRETS_KEY, new_project

KEY_VARIABLES = ("ENTRYWAY_SECRETS_KEY", "ENTRYWAY_SECRETS_KEY_FILE")


async def worker_exit(url: str, key: bytes | None) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARIABLES}
    if key is not None:
        env["ENTRYWAY_SECRETS_KEY"] = base64.b64encode(key).decode()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "entryway.worker", "--database-url", url,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    try:
        async with asyncio.timeout(30):
            _, stderr = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, stderr.decode()


async def test_a_worker_without_the_right_secrets_key_does_not_start(engine: AsyncEngine) -> None:
    url = engine.url.render_as_string(hide_password=False)
    project_id = await new_project(engine)
    store = WebhookStore(engine, destinations=PRIVATE_ALLOWED, secrets=SECRETS)
    await store.create_endpoint(project_id, "https://hooks.example.org/in", ["credits.low"])

    status, said = await worker_exit(url, None)
    assert status == 2 and "no secrets key" in said and "ENTRYWAY_SECRETS_KEY" in said

    wrong = bytes(32)
    status, said = await worker_exit(url, wrong)
    assert status == 1, said
    assert said.startswith("error: ") and "Traceback" not in said
    assert key_id(SECRETS_KEY) in said and key_id(wrong) in said
    assert base64.b64encode(wrong).decode() not in said
