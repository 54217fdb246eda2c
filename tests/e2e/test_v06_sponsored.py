"""EntryPoint v0.6 sponsored by Entryway, against a real `entryway up`: a v0.6 SimpleAccount's
op gets its `paymasterAndData` from ERC-7677 (stub, then signed data that
VerifyingPaymasterV06 accepts on chain), is included through the bundler and charged to the
project exactly once, with a `userop.included` webhook; its next op, sent around the service
by a stranger's direct `handleOps`, is charged all the same (the chain follower reads v0.6's
UserOperationEvent)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
from eth_account import Account

from entryway import contracts
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.chain.transactor import Transactor
from entryway.devnet.anvil import free_port
from entryway.domain.entry_points import V06
from entryway.domain.evm import address_bytes, hex_to_bytes
from entryway.domain.signatures import (
    eth_signed_message_digest,
    paymaster_digest_v06,
    sign_digest,
)
from entryway.domain.userop_v06 import (
    UserOperationV06,
    op_v06_to_json,
    user_op_hash_v06,
)
from tests.integration.webhooks.support import Receiver
from tests.running import start, stop

CHAIN = 80002
EP06 = contracts.load("EntryPointV06").abi
FACTORY06 = contracts.load("SimpleAccountFactoryV06").abi
PAYMASTER06 = contracts.load("VerifyingPaymasterV06").abi
WINDOW_AND_SIGNATURE = 6 + 6 + 65


async def _rpc(http: httpx.AsyncClient, method: str, *params: Any) -> Any:
    r = await http.post(
        f"/rpc/{CHAIN}", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)}
    )
    body = r.json()
    assert "error" not in body, body
    return body["result"]


async def _op_status(http: httpx.AsyncClient, op_hash: str) -> dict[str, Any]:
    status: dict[str, Any] = {}
    for _ in range(150):  # a few blocks at most
        r = await http.get("/op-status", params={"chainId": CHAIN, "userOpHash": op_hash})
        if r.status_code == 200:
            status = r.json()
            done = status.get("status") == "included" and status.get("creditsFinal")
            if done and status.get("submittedBy"):
                return status
        await asyncio.sleep(0.2)
    return status


async def _sponsored(
    http: httpx.AsyncClient, eth: EthClient, op: UserOperationV06, owner: Any
) -> UserOperationV06:
    """`op` with the service's paymasterAndData (stub, then final), signed by `owner`."""
    stub = await _rpc(http, "pm_getPaymasterStubData", op_v06_to_json(op), V06.address, hex(CHAIN))
    assert stub["isFinal"] is False and set(stub) >= {"paymasterAndData", "sponsor"}
    assert "paymasterData" not in stub  # v0.6's form: the paymaster's address leads the data
    data = await _rpc(http, "pm_getPaymasterData", op_v06_to_json(op), V06.address, hex(CHAIN))
    final = hex_to_bytes(data["paymasterAndData"])
    assert len(final) == len(hex_to_bytes(stub["paymasterAndData"])) == 20 + WINDOW_AND_SIGNATURE
    op = op.with_paymaster_and_data(final)
    # The digest signed is the one the contract computes.
    paymaster = op.paymaster
    assert paymaster is not None
    valid_until, valid_after = int.from_bytes(final[20:26]), int.from_bytes(final[26:32])
    on_chain = await eth.call(
        paymaster, PAYMASTER06.encode_call("getHash", op.as_tuple(), valid_until, valid_after)
    )
    assert on_chain == paymaster_digest_v06(op, CHAIN, paymaster, valid_until, valid_after)
    digest = eth_signed_message_digest(user_op_hash_v06(op, V06.address, CHAIN))
    return op.with_signature(sign_digest(bytes(owner.key), digest))


async def test_a_sponsored_v06_op_is_included_charged_once_and_announced(tmp_path: Path) -> None:
    port = free_port()
    env = {"ENTRYWAY_WEBHOOK_ALLOW_PRIVATE": "true"}
    proc = await start(tmp_path, port, env=env, log=tmp_path / "up.log")
    try:
        url = f"http://127.0.0.1:{port}"
        demo = json.loads((tmp_path / "demo.json").read_text())
        key, node = demo["apiKey"], demo["chains"][str(CHAIN)]["rpcUrl"]
        auth = {"Authorization": f"Bearer {key}"}
        async with (
            httpx.AsyncClient(base_url=url, headers=auth, timeout=30) as http,
            JsonRpcClient(node, chain_id=CHAIN) as rpc,
            Receiver() as receiver,
        ):
            made = await http.post(
                "/v1/webhooks/endpoints",
                json={"url": receiver.url, "eventTypes": ["userop.included"]},
            )
            assert made.status_code == 201, made.text
            eth = EthClient(rpc)
            defaults = (await http.get("/get-sdk-defaults", params={"chainId": CHAIN})).json()
            assert defaults["entryPointV06"] == V06.address
            factory, paymaster = defaults["simpleAccountFactoryV06"], defaults["paymasterV06"]
            owner = Account.create()
            raw = await eth.call(factory, FACTORY06.encode_call("getAddress", owner.address, 0))
            sender = str(FACTORY06.decode_output("getAddress", raw)[0])
            block = await eth.get_block("latest")
            base_fee = int(block["baseFeePerGas"], 16)
            op = UserOperationV06(
                sender=sender,  # holds nothing: the paymaster pays its deployment and call
                nonce=0,
                init_code=address_bytes(factory)
                + FACTORY06.encode_call("createAccount", owner.address, 0),
                call_data=b"",
                call_gas_limit=100_000,
                verification_gas_limit=500_000,
                pre_verification_gas=60_000,
                max_fee_per_gas=2 * base_fee + 30 * 10**9,
                max_priority_fee_per_gas=30 * 10**9,
            )
            before = (await http.get("/v1/credits")).json()["balance"]

            first = await _sponsored(http, eth, op, owner)
            first_hash = await _rpc(
                http, "eth_sendUserOperation", op_v06_to_json(first), V06.address
            )
            assert first_hash == "0x" + user_op_hash_v06(first, V06.address, CHAIN).hex()
            status = await _op_status(http, first_hash)
            assert status.get("status") == "included", status
            assert status["submittedBy"] == "entryway"
            receipt = await _rpc(http, "eth_getUserOperationReceipt", first_hash)
            assert receipt["success"] is True and receipt["paymaster"].lower() == paymaster.lower()
            charged = status["credits"]
            assert isinstance(charged, int) and charged > 0
            await receiver.wait_for(1)
            event = json.loads(receiver.received[0].body)
            assert event["type"] == "userop.included", event
            assert json.dumps(event).lower().count(first_hash.lower()) >= 1

            # The next op, sent by a stranger straight to the EntryPoint.
            second = await _sponsored(http, eth, replace(op, nonce=1, init_code=b""), owner)
            second_hash = "0x" + user_op_hash_v06(second, V06.address, CHAIN).hex()
            stranger = Account.create()
            await rpc.request("anvil_setBalance", [stranger.address, hex(10**19)])
            data = EP06.encode_call("handleOps", [second.as_tuple()], stranger.address)
            await Transactor(eth, stranger, CHAIN).send(V06.address, data)
            around = await _op_status(http, second_hash)
            assert around.get("status") == "included", around
            assert around["submittedBy"] == "external"
            assert isinstance(around["credits"], int) and around["credits"] > 0

            # The op's page (the dashboard's, as /v1/ops answers it) reads the v0.6 form of
            # the op mined around the service: its paymaster, its gas as v0.6 reserves it.
            page = (await http.get(f"/v1/ops/{second_hash}", params={"chainId": CHAIN})).json()
            assert page["status"] == "included", page
            assert page["fields"]["entryPoint"] == V06.address
            assert page["fields"]["paymaster"] == paymaster and page["fields"]["factory"] is None
            assert page["gas"]["estimated"] == str(second.max_gas)
            assert page["credits"]["total"] == around["credits"]
            first_page = (await http.get(f"/v1/ops/{first_hash}", params={"chainId": CHAIN})).json()
            assert first_page["fields"]["factory"] == factory

            # Charged once each: one settled sponsorship per op, at what /op-status says, and
            # the balance fell by every usage event's credits and nothing else.
            exported = await http.get("/v1/usage/export", params={"format": "json"})
            events = exported.json()
            sponsorships = [e for e in events if e["operation"] == "sponsored_user_operation"]
            assert [e["credits"] for e in sponsorships] == [charged, around["credits"]]
            assert all(e["status"] == "settled" for e in sponsorships)
            after = (await http.get("/v1/credits")).json()["balance"]
            assert before - after == sum(e["credits"] for e in events)
            # The op mined around the service is announced too.
            await receiver.wait_for(2)
            assert second_hash in receiver.received[1].body.decode().lower()
    finally:
        await stop(proc)
