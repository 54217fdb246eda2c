"""Heavy JSON-RPC calls (estimation, sending, `pm_*`) on a real devnet: a project's keys share
one rate limit, and heavy calls also draw on a tighter window of their own, per plan, so
minting keys buys neither more requests nor more simulations; light calls still run."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.standalone import StandaloneSettings, build_bundler
from entryway.bundler.states import BundlingMode
from entryway.chain.rpc import EthClient
from entryway.devnet.devnet import Devnet
from entryway.domain.plans import PlanName
from entryway.service.ratelimit import DEFAULT_HEAVY_LIMITS, RateLimiter, parse_limits
from entryway.service.services import ChainRuntime
from tests.integration.api.conftest import Api, make_api
from tests.integration.api.test_rate_limits import clear_of_minute_edge, redis_url
from tests.integration.harness import ETHER, Harness
from tests.integration.test_rate_limit_redis import Sent

CHAIN = 80002
HEAVY = {**DEFAULT_HEAVY_LIMITS, PlanName.FREE: "3/minute", PlanName.PRO: "6/minute"}
LIMITS = {**parse_limits(""), PlanName.FREE: "40/minute"}


@pytest.fixture(params=["memory", "redis"])
async def served(
    request: pytest.FixtureRequest, engine: AsyncEngine, devnet: Devnet, eth: EthClient
) -> AsyncIterator[Api]:
    url = await redis_url() if request.param == "redis" else None
    executor = Harness.new_key()
    await eth.rpc.request("anvil_setBalance", [executor.address, hex(10 * ETHER)])
    chain = devnet.chains[0]
    rpc: BundlerRpc = await build_bundler(
        eth,
        StandaloneSettings(
            rpc_url=chain.rpc_url,
            entry_point=chain.deployment.entry_point,
            executor_keys=(executor,),
            mode=BundlingMode.MANUAL,
        ),
    )
    # Each test makes its own projects: their windows in Redis are new, whatever ran before.
    await clear_of_minute_edge()
    async for api in make_api(engine, RateLimiter(LIMITS, url, heavy_by_plan=HEAVY)):
        api.services.chains[CHAIN] = ChainRuntime(CHAIN, chain.rpc_url, chain.deployment, rpc, eth)
        yield api


def call(method: str, i: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": i, "method": method, "params": []}


async def test_heavy_calls_are_bounded_per_project_whichever_key_sends_them(served: Api) -> None:
    keys = [served.key, await served.service_key(), await served.service_key()]
    codes = []
    for i in range(5):  # estimation and paymaster calls, spread over three keys
        method = "eth_estimateUserOperationGas" if i % 2 else "pm_getPaymasterStubData"
        r = await served.client.post(
            f"/rpc/{CHAIN}", headers=served.auth(keys[i % 3]), json=call(method, i)
        )
        assert r.status_code == 200, r.text
        codes.append(r.json()["error"]["code"])
        if codes[-1] == -32005:
            assert "3 heavy calls" in r.json()["error"]["message"]
            assert 1 <= int(r.headers["Retry-After"]) <= 60
    # Three ran (and failed on their empty params); the rest were refused unrun.
    assert -32005 not in codes[:3]
    assert codes[3:] == [-32005, -32005]

    # Light calls still run for every key of the project.
    for key in keys:
        r = await served.client.post(
            f"/rpc/{CHAIN}", headers=served.auth(key), json=call("eth_chainId")
        )
        assert int(r.json()["result"], 16) == CHAIN

    # In a batch, heavy calls past the window are answered -32005 and the light ones run.
    batch = [
        call("eth_chainId", 1),
        call("eth_estimateUserOperationGas", 2),
        call("eth_chainId", 3),
    ]
    answers = (await served.client.post(f"/rpc/{CHAIN}", headers=served.auth(), json=batch)).json()
    assert [("result" in a, a.get("error", {}).get("code")) for a in answers] == [
        (True, None), (False, -32005), (True, None),
    ]  # fmt: skip

    # Another project has its own window, by its own plan.
    _, other = await served.new_project(PlanName.PRO, chains=(CHAIN,))
    refused = 0
    for i in range(7):
        r = await served.client.post(
            f"/rpc/{CHAIN}",
            headers=served.auth(other),
            json=call("eth_estimateUserOperationGas", i),
        )
        refused += r.json()["error"]["code"] == -32005
    assert refused == 1


async def test_a_projects_keys_share_its_request_limit(served: Api) -> None:
    keys = [served.key, *[await served.service_key() for _ in range(3)]]
    answers = []
    for i in range(44):
        r = await served.client.get("/v1/project", headers=served.auth(keys[i % 4]))
        answers.append(r.status_code)
    assert answers[:40] == [200] * 40
    assert answers[40:] == [429] * 4
    _, other = await served.new_project(PlanName.FREE, chains=(CHAIN,))
    assert (await served.client.get("/v1/project", headers=served.auth(other))).status_code == 200


async def test_a_heavy_call_counts_its_two_windows_in_one_round_trip(
    served: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The project's window and the heavy calls' are counted together when the request is
    one heavy call: one round trip to Redis before it runs, not two; a batch counts its
    heavy calls one by one."""
    limiter = served.services.platform.limiter
    assert limiter is not None
    trips = 1 if limiter.shared is not None else 0  # in memory: none
    await served.client.post(f"/rpc/{CHAIN}", headers=served.auth(), json=call("eth_chainId"))
    sent = Sent(monkeypatch)
    r = await served.client.post(
        f"/rpc/{CHAIN}", headers=served.auth(), json=call("eth_estimateUserOperationGas")
    )
    assert r.json()["error"]["code"] != -32005
    assert sent.commands == ["EVALSHA"] * trips
    sent.commands.clear()
    batch = [call("eth_estimateUserOperationGas", 1), call("eth_chainId", 2)]
    await served.client.post(f"/rpc/{CHAIN}", headers=served.auth(), json=batch)
    # The batch's first call, the one after it, then its heavy one.
    assert sent.commands == ["EVALSHA"] * 3 * trips


async def test_the_route_takes_the_body_as_the_shortcut_parsed_it(
    served: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A JSON-RPC body is parsed once, by the shortcut that marks heavy calls: the route
    answers without parsing it again; a body that is not JSON still gets -32700."""
    import entryway.service.routes_chain as routes

    class NoParsing:
        JSONDecodeError = orjson.JSONDecodeError

        @staticmethod
        def loads(body: bytes) -> object:
            raise AssertionError("the route parsed the body again")

    monkeypatch.setattr(routes, "orjson", NoParsing)
    for body in (call("eth_chainId"), call("eth_estimateUserOperationGas")):
        r = await served.client.post(f"/rpc/{CHAIN}", headers=served.auth(), json=body)
        assert r.status_code == 200 and "jsonrpc" in r.json()
    monkeypatch.undo()
    r = await served.client.post(
        f"/rpc/{CHAIN}",
        headers={**served.auth(), "content-type": "application/json"},
        content=b"{not json",
    )
    assert r.status_code == 200 and r.json()["error"]["code"] == -32700
