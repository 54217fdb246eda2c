"""The service on each kind of node operators have, as an operator runs it: `entryway serve`
from a config file whose only RPC URL is a relay in front of anvil (`tests.node_kinds`) that
answers as a hosted provider (callTracer and prestateTracer only, log ranges, batches and
bursts capped), a public endpoint (no debug namespace) or geth 1.16 (its erc7562Tracer),
with Entryway deployed by `entryway deploy`. On each, the service starts in the validation
mode that kind allows and says so (`/get-sdk-defaults`), and the gasless flows
pass through the SDK: a wallet deployed by its first, sponsored, op; an op the wallet pays
for itself; guardians set and a recovery started, delayed and finalized, each step
sponsored. A standalone bundler on the public endpoint refuses to start unless told to run
untraced."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from entryway_sdk import Entryway, PendingUserOperation
from eth_account import Account

from entryway.storage.engine import sqlite_url
from tests.integration.test_config_processes import (
    CHAIN_ID,
    _free_port,
    anvil_with_entryway,
    config,
    run,
)
from tests.integration.test_production_path import stake_the_paymaster
from tests.integration.test_serve import admin_key, serve, stopped
from tests.node_kinds import node_relay

pytestmark = pytest.mark.anvil
DELAY = 2 * 24 * 3600  # SmartAccount's default recovery delay
KINDS = [("hosted", "calls"), ("public", "untraced"), ("geth", "native")]


async def mined(op: PendingUserOperation) -> None:
    receipt = await op.wait(timeout=60, poll_interval=0.3)
    assert receipt.success, receipt.reason


async def anvil(url: str, method: str, *params: object) -> None:
    async with httpx.AsyncClient() as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)}
        assert "result" in (await http.post(url, json=body)).json()


@pytest.mark.parametrize(("kind", "mode"), KINDS, ids=[k for k, _ in KINDS])
async def test_serve_runs_the_gasless_flows_on_each_kind_of_node(
    tmp_path: Path, kind: str, mode: str
) -> None:
    async with anvil_with_entryway(tmp_path, CHAIN_ID) as d, node_relay(d.rpc_url, kind) as node:
        await stake_the_paymaster(d)
        path = config(d, kind, rpc_url=node.url)
        port = _free_port()
        base = f"http://127.0.0.1:{port}"
        proc = await serve(path, port)
        try:
            key = await admin_key(sqlite_url(d.root / f"data-{kind}"), f"{kind}@example.org")
            auth = {"Authorization": f"Bearer {key}"}
            async with httpx.AsyncClient(base_url=base, headers=auth) as http:
                defaults = await http.get("/get-sdk-defaults", params={"chainId": CHAIN_ID})
                assert defaults.json()["validationMode"] == mode, defaults.text
            async with await Entryway.init(
                api_key=key, rpc_url=node.url, chain_id=CHAIN_ID, base_url=base
            ) as client:
                guardian = Account.create()
                wallet = await client.wallet(Account.create())
                await mined(await wallet.add_guardian(guardian.address))  # deploys it too
                assert await wallet.is_deployed()
                await anvil(d.rpc_url, "anvil_setBalance", wallet.address, hex(10**18))
                await mined(await wallet.send({"to": guardian.address}, sponsored=False))
                new_owner = Account.create()
                approval = await wallet.recovery_approval(guardian, new_owner.address)
                await mined(await wallet.start_recovery(new_owner.address, [approval]))
                await anvil(d.rpc_url, "evm_increaseTime", DELAY + 1)
                await anvil(d.rpc_url, "evm_mine")
                await mined(await wallet.finalize_recovery())
                assert (await wallet.info()).owner == new_owner.address
        finally:
            await stopped(proc)
        assert node.calls["eth_sendRawTransaction"] >= 4  # the bundles went through the relay
        assert "anvil_setBalance" not in node.calls  # the service asked nothing anvil-only


async def test_a_standalone_bundler_on_a_public_endpoint_runs_untraced_only_when_told(
    tmp_path: Path,
) -> None:
    async with (
        anvil_with_entryway(tmp_path, CHAIN_ID) as d,
        node_relay(d.rpc_url, "public") as node,
    ):
        keys = str(d.keys / "executor.key")
        args = ("bundler", "--rpc-url", node.url, "--executor-key-file", keys)
        code, out = await run(*args, "--port", str(_free_port()))
        assert code != 0, out
        assert "pin --validation-mode untraced" in out, out
