"""A tenant tries to have our paymaster pay without being charged, against a real
`entryway up`: it prepares a sponsored op with the SDK (pm_getPaymasterData included), signs
it, never calls eth_sendUserOperation, and has a fresh EOA call `handleOps` on the node. The
service charges the project within a few blocks, and /op-status shows the op as submitted
around it."""

from __future__ import annotations

import asyncio
import json
from functools import partial
from pathlib import Path

import httpx
from entryway_sdk import Entryway
from entryway_sdk.operations import SendOptions
from entryway_sdk.signer import as_signer, dummy_signature, sign
from eth_account import Account

from entryway import contracts
from entryway.bundler.rpc_types import parse_user_operation
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.chain.transactor import Transactor
from entryway.devnet.anvil import free_port
from tests.running import start, stop

EP = contracts.load("EntryPoint").abi
CHAIN = 80002


async def test_an_op_sent_around_the_service_is_charged_to_its_project(tmp_path: Path) -> None:
    port = free_port()
    proc = await start(tmp_path, port)
    client = None
    try:
        url = f"http://127.0.0.1:{port}"
        demo = json.loads((tmp_path / "demo.json").read_text())
        key, node = demo["apiKey"], demo["chains"][str(CHAIN)]["rpcUrl"]
        auth = {"Authorization": f"Bearer {key}"}
        client = await Entryway.init(api_key=key, rpc_url=node, chain_id=CHAIN, base_url=url)
        async with httpx.AsyncClient(base_url=url, headers=auth) as http:
            before = (await http.get("/v1/credits")).json()
            owner = Account.create()
            wallet = await client.wallet(owner)
            session = wallet._chain
            draft = await wallet._draft(b"")
            prepared = await session.prepare(
                draft, dummy_signature(bytes(32)), SendOptions(True, None, "standard")
            )
            signed = await session.sign(prepared, partial(sign, as_signer(owner)))
            op_hash = "0x" + session.hash(signed).hex()
            held = (await http.get("/v1/credits")).json()
            assert held["balance"] < before["balance"]  # the estimate is held at signing

            async with JsonRpcClient(node, chain_id=CHAIN) as rpc:
                eth = EthClient(rpc)
                stranger = Account.create()
                await rpc.request("anvil_setBalance", [stranger.address, hex(10**19)])
                op = parse_user_operation(signed.to_rpc())
                data = EP.encode_call("handleOps", [op.packed()], stranger.address)
                await Transactor(eth, stranger, CHAIN).send(session.entry_point, data)

            status: dict[str, object] = {}
            for _ in range(150):  # a few blocks at most
                r = await http.get("/op-status", params={"chainId": CHAIN, "userOpHash": op_hash})
                if r.status_code == 200:
                    status = r.json()
                    if status.get("creditsFinal") is not None and status.get("submittedBy"):
                        break
                await asyncio.sleep(0.2)
            assert status.get("status") == "included", status
            assert status["submittedBy"] == "external"
            # Settled at the gas the event says was paid: below the hold, never nothing.
            hold = before["balance"] - held["balance"]
            assert isinstance(status["credits"], int) and 0 < status["credits"] < hold
    finally:
        if client is not None:
            await client.aclose()
        await stop(proc)
