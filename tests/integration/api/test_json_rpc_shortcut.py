"""POST /rpc/{chain_id} is answered without FastAPI's routing and dependency solving, and
answers exactly as the route did: the key checked (401 problem), the chain's access (403),
the metrics' and the request log's route template, a chain id the route refuses (422)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.routing import APIRoute

from entryway.service.json_rpc_shortcut import json_rpc_route
from entryway.service.routes_chain import chain_routes
from tests.integration.api.conftest import Api
from tests.integration.api.test_edge import CHAIN, call, serve_chain

PROBLEM = "application/problem+json"


@pytest.fixture
def routed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths FastAPI's routing handed to a route, from now on."""
    seen: list[str] = []
    handle = APIRoute.handle

    async def counted(self: APIRoute, scope: Any, receive: Any, send: Any) -> None:
        seen.append(self.path)
        await handle(self, scope, receive, send)

    monkeypatch.setattr(APIRoute, "handle", counted)
    return seen


async def test_a_call_skips_the_router_and_a_rest_call_does_not(
    api: Api, routed: list[str]
) -> None:
    bundler = serve_chain(api)
    r = await api.client.post(f"/rpc/{CHAIN}", headers=api.auth(), json=call(7))
    assert r.json() == {"jsonrpc": "2.0", "id": 7, "result": "0x13882"}
    assert [c["id"] for c in bundler.calls] == [7]
    assert routed == []
    r = await api.client.get(f"/get-sdk-defaults?chainId={CHAIN}", headers=api.auth())
    assert routed == ["/get-sdk-defaults"]


async def test_refusals_are_the_routes_own(api: Api, routed: list[str]) -> None:
    bundler = serve_chain(api)
    r = await api.client.post(f"/rpc/{CHAIN}", json=call(1))  # no key
    assert (r.status_code, r.headers["content-type"]) == (401, PROBLEM)
    assert r.json()["code"] == "invalid_api_key"
    r = await api.client.post(f"/rpc/{CHAIN}?apikey={api.key}", json=call(2))  # the URL's key
    assert r.json()["result"] == "0x13882"
    r = await api.client.post("/rpc/137", headers=api.auth(), json=call(3))  # not the project's
    assert (r.status_code, r.headers["content-type"]) == (403, PROBLEM)
    assert r.headers["x-request-id"] and r.json()["instance"] == "/rpc/137"
    assert [c["id"] for c in bundler.calls] == [2]
    assert routed == []
    # Chain ids only the route's own validation refuses reach the route, and get its 422.
    for bad in ("080002", "0", str(2**53 + 1)):
        r = await api.client.post(f"/rpc/{bad}", headers=api.auth(), json=call(4))
        assert r.status_code == 422, bad
    assert routed == ["/rpc/{chain_id}"] * 3


async def test_metrics_and_the_request_log_name_the_route(api: Api) -> None:
    serve_chain(api)
    await api.client.post(f"/rpc/{CHAIN}", json=call(1))  # refused before any call ran
    recorder = api.services.request_log
    assert recorder is not None
    logged = [c for c in recorder._pending if c.http_status == 401]
    assert [c.method for c in logged] == []  # no key: no project to log it under
    r = await api.client.post("/rpc/137", headers=api.auth(), json=call(2))
    assert r.status_code == 403
    refused = [c for c in recorder._pending if c.http_status == 403]
    assert [(c.method, c.chain_id) for c in refused] == [("POST /rpc/{chain_id}", 137)]
    assert refused[0].message is not None and refused[0].message.startswith("chain_not_")
    app = api.client._transport.app  # type: ignore[attr-defined]  # the ASGI transport's
    counted = app.state.metrics.registry.get_sample_value(
        "entryway_http_requests_total",
        {"method": "POST", "route": "/rpc/{chain_id}", "status": "403"},
    )
    assert counted == 1


def test_the_route_is_found_on_its_router() -> None:
    route = json_rpc_route(chain_routes(("",)))
    assert (route.path, route.methods) == ("/rpc/{chain_id}", {"POST"})
