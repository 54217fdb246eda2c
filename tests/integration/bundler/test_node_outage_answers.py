"""A chain whose node is down, as the service's clients see it: HTTP 503 with Retry-After
(which the SDK retries), a message naming the condition, and nothing of the node's host,
port or the client library's exception."""

from __future__ import annotations

import httpx

from entryway.domain.plans import PlanName
from entryway.service.chain_access import NODE_RETRY_AFTER_S
from entryway.service.services import Services
from tests.integration.bundler.test_service_chain_routes import (  # noqa: F401 - fixture
    CHAIN,
    rpc,
    service,
    tenant,
)

DOWN = 84532  # served by a closed port in the `service` fixture


def leaks(text: str) -> list[str]:
    return [s for s in ("127.0.0.1", "localhost", "Error(", "ConnectionKey") if s in text]


async def test_a_node_outage_is_answered_503_with_retry_after_naming_the_condition(
    service: tuple[httpx.AsyncClient, Services],  # noqa: F811
) -> None:
    client, services = service
    _, key = await tenant(services, PlanName.PRO, [CHAIN, DOWN])
    auth = {"Authorization": f"Bearer {key}"}
    answers = [
        await client.post(f"/rpc/{DOWN}", json=rpc("eth_chainId"), headers=auth),
        await client.post(
            f"/rpc/{DOWN}", json=rpc("eth_sendUserOperation", {}, "0x" + "00" * 20), headers=auth
        ),
        await client.get("/get-sdk-defaults", params={"chainId": DOWN}, headers=auth),
    ]
    for r in answers:
        assert r.status_code == 503, r.text
        assert r.headers["Retry-After"] == str(NODE_RETRY_AFTER_S)
        assert "the RPC endpoint did not answer" in r.text
        assert leaks(r.text) == [], r.text
    live = await client.post(f"/rpc/{CHAIN}", json=rpc("eth_chainId"), headers=auth)
    assert live.status_code == 200 and "Retry-After" not in live.headers
