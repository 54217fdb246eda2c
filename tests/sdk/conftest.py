"""The SDK's tests: unit tests (pure, or over httpx.MockTransport) and tests against one real
`entryway up` per session, started only when a test asks for the `service` fixture.

`sdk/src` goes on the path here so the repository's pytest imports `entryway_sdk` without
installing it (`pip install -e sdk` does the same)."""

from __future__ import annotations

import json
import secrets
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

SDK_SRC = Path(__file__).resolve().parents[2] / "sdk" / "src"
if str(SDK_SRC) not in sys.path:
    sys.path.insert(0, str(SDK_SRC))

from entryway.devnet.anvil import free_port  # noqa: E402 - after the path is set
from tests.running import start, stop  # noqa: E402
from tests.sdk.fakes import Fake  # noqa: E402


@dataclass(frozen=True)
class Service:
    """A running `entryway up`: its URL, the demo project's key and chains, the operator."""

    url: str
    api_key: str
    project_id: str
    chains: dict[str, dict[str, Any]]
    admin_token: str
    data_dir: Path

    def rpc_url(self, chain_id: int) -> str:
        return str(self.chains[str(chain_id)]["rpcUrl"])

    async def node(self, chain_id: int, method: str, *params: Any) -> Any:
        """One call to the devnet's own RPC (anvil), e.g. to move its clock."""
        async with httpx.AsyncClient() as http:
            body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)}
            answer = (await http.post(self.rpc_url(chain_id), json=body)).json()
        assert "error" not in answer, answer
        return answer["result"]

    async def new_project(self, chains: list[int]) -> str:
        """A fresh FREE project on `chains` (operator route); its API key."""
        async with httpx.AsyncClient(base_url=self.url) as http:
            r = await http.post(
                "/v1/admin/projects",
                headers={"Authorization": f"Bearer {self.admin_token}"},
                json={
                    "email": f"sdk-{secrets.token_hex(4)}@example.org",
                    "name": "SDK tests",
                    "chains": chains,
                },
            )
        assert r.status_code == 201, r.text
        return str(r.json()["apiKey"])


@pytest.fixture(scope="session")
async def service(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Service]:
    data_dir = tmp_path_factory.mktemp("entryway-sdk")
    port = free_port()
    # The tests' webhook receivers listen on loopback: the operator's opt-in lets them receive.
    proc = await start(data_dir, port, env={"ENTRYWAY_WEBHOOK_ALLOW_PRIVATE": "true"})
    try:
        demo = json.loads((data_dir / "demo.json").read_text())
        yield Service(
            url=f"http://127.0.0.1:{port}",
            api_key=demo["apiKey"],
            project_id=demo["projectId"],
            chains=demo["chains"],
            admin_token=(data_dir / "admin-token").read_text().strip(),
            data_dir=data_dir,
        )
    finally:
        await stop(proc)


@pytest.fixture
def fake() -> Fake:
    """A fake service and node for unit tests (see `http`)."""
    return Fake()


@pytest.fixture
async def http(fake: Fake) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client whose every request `fake` answers."""
    async with httpx.AsyncClient(transport=httpx.MockTransport(fake.handle)) as client:
        yield client
