"""`entryway up` as an operator starts it, without any webhook or key settings: the data
directory is narrowed to 0700, the database, the secrets key and the tokens are 0600, a
webhook URL on loopback is refused, and a signing secret never reaches the database file in
clear. Restarted, the service opens the secrets it sealed before (the key was kept)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import httpx

from entryway.devnet.anvil import free_port
from tests.running import start, stop

PRIVATE_FILES = ("entryway.sqlite3", "secrets-key", "admin-token", "demo.json")


def modes(data_dir: Path) -> dict[str, int]:
    files = [data_dir, *(data_dir / name for name in PRIVATE_FILES)]
    files += [p for p in data_dir.glob("entryway.sqlite3-*")]
    return {p.name: stat.S_IMODE(p.stat().st_mode) for p in files}


def database_bytes(data_dir: Path) -> bytes:
    return b"".join(p.read_bytes() for p in data_dir.glob("entryway.sqlite3*"))


async def test_up_keeps_its_data_private_and_webhooks_public(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    data_dir.chmod(0o755)  # as an older version, or the operator, left it
    port = free_port()
    service = await start(data_dir, port)
    try:
        expected = {name: 0o600 for name in modes(data_dir)} | {"data": 0o700}
        assert modes(data_dir) == expected
        key = json.loads((data_dir / "demo.json").read_text())["apiKey"]
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {key}"}
        ) as http:
            refused = await http.post(
                "/v1/webhooks/endpoints",
                json={"url": f"http://127.0.0.1:{port}/v1/admin", "eventTypes": ["credits.low"]},
            )
            assert (
                refused.status_code == 422 and refused.json()["code"] == "webhook_url_not_allowed"
            )
            created = await http.post(
                "/v1/webhooks/endpoints",
                json={"url": "https://hooks.example.org/in", "eventTypes": ["credits.low"]},
            )
            assert created.status_code == 201, created.text
        secret = created.json()["secret"]
        assert secret.removeprefix("whsec_").encode() not in database_bytes(data_dir)
        sealed_with = (data_dir / "secrets-key").read_text()
    finally:
        await stop(service)

    service = await start(data_dir, port)
    try:
        assert (data_dir / "secrets-key").read_text() == sealed_with
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {key}"}
        ) as http:
            endpoint = created.json()["id"]
            rotated = await http.post(f"/v1/webhooks/endpoints/{endpoint}/rotate-secret")
            assert rotated.status_code == 200, rotated.text  # the old secret opened
    finally:
        await stop(service)
