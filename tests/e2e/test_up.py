"""`entryway up` as an operator runs it: devnets, the API and the bundlers in one process."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from entryway.devnet.anvil import free_port
from tests.running import start, stop


@pytest.fixture
async def service(tmp_path: Path) -> AsyncIterator[tuple[str, dict[str, Any], Path]]:
    port = free_port()
    proc = await start(tmp_path, port)
    try:
        demo = json.loads((tmp_path / "demo.json").read_text())
        yield f"http://127.0.0.1:{port}", demo, tmp_path
    finally:
        await stop(proc)


async def test_the_demo_key_reaches_sdk_defaults_and_the_bundler(
    service: tuple[str, dict[str, Any], Path],
) -> None:
    url, demo, _ = service
    auth = {"Authorization": f"Bearer {demo['apiKey']}"}
    assert set(demo["chains"]) == {"80002", "84532"}
    async with httpx.AsyncClient(base_url=url) as http:
        r = await http.get("/get-sdk-defaults", params={"chainId": 80002}, headers=auth)
        assert r.status_code == 200, r.text
        assert r.headers["Entryway-API-Version"] == "v1"
        body = r.json()
        assert body["entryPoint"] == "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108"
        assert body["paymaster"] == demo["chains"]["80002"]["paymaster"]
        assert body["bundlerUrl"] == f"{url}/rpc/80002" and body["nativeToken"] == "POL"
        listed = (await http.get("/v1/sdk-defaults", headers=auth)).json()
        assert sorted(listed["chains"]) == ["80002", "84532"]
        rpc = await http.post(
            "/rpc/84532",
            params={"apikey": demo["apiKey"]},
            json={"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []},
        )
        assert rpc.json() == {"jsonrpc": "2.0", "id": 1, "result": hex(84532)}


async def test_the_demo_has_an_admin_key_and_a_service_key_for_apps(
    service: tuple[str, dict[str, Any], Path],
) -> None:
    url, demo, _ = service
    admin = {"Authorization": f"Bearer {demo['apiKey']}"}
    app = {"Authorization": f"Bearer {demo['serviceKey']}"}
    async with httpx.AsyncClient(base_url=url) as http:
        keys = (await http.get("/v1/keys", headers=admin)).json()
        assert sorted(k["role"] for k in keys) == ["admin", "service"]
        assert all(k["chains"] == [80002, 84532] for k in keys)
        r = await http.get("/get-sdk-defaults", params={"chainId": 84532}, headers=app)
        assert r.status_code == 200, r.text
        r = await http.patch("/v1/project", headers=app, json={"name": "mine now"})
        assert (r.status_code, r.json()["code"]) == (403, "admin_key_required")


async def test_errors_are_problem_details_with_stable_codes(
    service: tuple[str, dict[str, Any], Path],
) -> None:
    url, demo, _ = service
    async with httpx.AsyncClient(base_url=url) as http:
        missing = await http.get("/get-sdk-defaults", params={"chainId": 80002})
        assert missing.status_code == 401
        assert missing.headers["content-type"] == "application/problem+json"
        assert missing.json()["code"] == "invalid_api_key"
        bogus = await http.get(
            "/get-sdk-defaults",
            params={"chainId": 80002},
            headers={"Authorization": "Bearer ew_test_nope"},
        )
        assert bogus.status_code == 401
        auth = {"Authorization": f"Bearer {demo['apiKey']}"}
        mainnet = await http.get("/get-sdk-defaults", params={"chainId": 137}, headers=auth)
        problem = mainnet.json()
        assert mainnet.status_code == 403 and problem["code"] == "chain_not_recognised"
        failed = {c["check"] for c in problem["checks"] if not c["passed"]}
        assert failed == {
            "the chain ID is enabled for the project",
            "the API key has access to that network",
        }
        rpc = await http.post(
            "/rpc/137", headers=auth, json={"jsonrpc": "2.0", "id": 1, "method": "eth_chainId"}
        )
        assert rpc.status_code == 403


async def test_a_restart_keeps_the_demo_key_and_the_chains(tmp_path: Path) -> None:
    port = free_port()
    proc = await start(tmp_path, port)
    first = json.loads((tmp_path / "demo.json").read_text())
    await stop(proc)
    assert (tmp_path / "demo.json").stat().st_mode & 0o077 == 0
    port = free_port()
    proc = await start(tmp_path, port)
    try:
        again = json.loads((tmp_path / "demo.json").read_text())
        assert again["apiKey"] == first["apiKey"] and again["projectId"] == first["projectId"]
        assert again["serviceKey"] == first["serviceKey"]
        for chain_id, chain in first["chains"].items():
            for name in ("entryPoint", "accountFactory", "paymaster", "notary"):
                assert again["chains"][chain_id][name] == chain[name]
            async with httpx.AsyncClient() as node:  # the written RPC URL is the live one
                r = await node.post(
                    again["chains"][chain_id]["rpcUrl"],
                    json={"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []},
                )
                assert int(r.json()["result"], 16) == int(chain_id)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            r = await http.get(
                "/sdk-defaults", headers={"Authorization": f"Bearer {first['apiKey']}"}
            )
            assert r.status_code == 200 and sorted(r.json()["chains"]) == ["80002", "84532"]
    finally:
        await stop(proc)


async def test_operators_see_the_paymaster_deposits_and_a_low_one_is_flagged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENTRYWAY_PAYMASTER_DEPOSIT_ALERT_WEI", str(10**30))  # above any deposit
    port = free_port()
    proc = await start(tmp_path, port)
    try:
        token = (tmp_path / "admin-token").read_text().strip()
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            for _ in range(50):
                r = await http.get(
                    "/v1/admin/paymaster", headers={"Authorization": f"Bearer {token}"}
                )
                deposits = r.json()["deposits"]
                if len(deposits) == 8:
                    break
                await asyncio.sleep(0.1)
            # Every paymaster is watched: v0.8's, v0.7's, v0.9's and v0.6's, on each chain.
            demo = json.loads((tmp_path / "demo.json").read_text())
            paymasters = [
                (int(chain_id), version, chain[name].lower())
                for chain_id, chain in sorted(demo["chains"].items())
                for version, name in (
                    ("0.8", "paymaster"),
                    ("0.7", "paymasterV07"),
                    ("0.9", "paymasterV09"),
                    ("0.6", "paymasterV06"),
                )
            ]
            assert [
                (d["chainId"], d["entryPointVersion"], d["paymaster"].lower()) for d in deposits
            ] == paymasters
            assert all(d["low"] and int(d["depositWei"]) > 0 for d in deposits)
            metrics = (await http.get("/metrics")).text
            gauges = {
                (int(s.labels["chain"]), s.labels["paymaster"].lower())
                for family in text_string_to_metric_families(metrics)
                if family.name == "entryway_paymaster_deposit_wei"
                for s in family.samples
            }
            assert gauges == {(chain_id, pm) for chain_id, _, pm in paymasters}
            refused = await http.get("/v1/admin/paymaster")
            assert refused.json()["code"] == "invalid_admin_token"
    finally:
        await stop(proc)
