"""The gasless flow on a node that is not anvil: Hardhat's node (its EDR engine, from npm),
started here as Base Sepolia with one funded account and nothing of Entryway's. Every other
account is funded by a plain transfer, as on a real chain; `entryway deploy` puts the
contracts on it and `entryway bundler` serves it, both as an operator runs them. Then a
wallet is deployed by its first op, the wallet pays for a second op itself (its gas limits
estimated by the bundler), and a third op from a new, empty wallet is paid by the deployed
paymaster: each is included, as the EntryPoint's UserOperationEvent and the bundle's
transaction receipt say. The service runs there too: `entryway serve` from a config file
whose RPC URL is the Hardhat node, and through the SDK a wallet deployed by a sponsored first
op, an op it pays for itself, and a recovery.

Hardhat's `debug_traceCall` ignores state overrides and takes no named tracer
(docs/devnets.md, "A second node implementation"): the bundler's probe finds no tracer it can
judge by. The service, which takes ops only with API keys, then runs the chain untraced by
itself: the EntryPoint's own checks, stake and reputation, without ERC-7562's tracing rules.
A standalone bundler starts only when told to (`--validation-mode untraced`). It is
started with `--deploy-entry-point` too: on a node that is not anvil it leaves EntryPoint
v0.6 alone rather than copy code into place with `anvil_setCode`, which Hardhat refuses."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from entryway_sdk import Entryway, PendingUserOperation, UserOperationReceipt
from eth_account import Account
from eth_account.signers.local import LocalAccount

from entryway.bundler.rpc_types import user_operation_json
from entryway.chain.rpc import EthClient, JsonRpcClient, RpcTransportError
from entryway.chain.transactor import Transactor
from entryway.devnet.anvil import free_port
from entryway.domain.userop import UserOperation
from entryway.storage.engine import sqlite_url
from tests.e2e.test_node_kinds import DELAY, mined
from tests.integration.harness import ACCOUNT, ETHER, PAYMASTER, Harness
from tests.integration.test_bundler_failover import harness_for
from tests.integration.test_config_processes import CHAIN_ID, ENTRYWAY, Deployed, config, run
from tests.integration.test_serve import admin_key, serve, stopped

pytestmark = pytest.mark.hardhat

ROOT = Path(__file__).parents[2]
HARDHAT = ROOT / "node_modules" / ".bin" / "hardhat"
CONFIG = ROOT / "tests" / "node" / "hardhat.config.cjs"
DEADLINE_S = 30.0

UNTRACED = ("--validation-mode", "untraced")


@asynccontextmanager
async def hardhat_node(chain_id: int, funder: LocalAccount) -> AsyncIterator[str]:
    """Hardhat's node on a free loopback port, `funder` its one account; its URL once it
    answers. Stopped with SIGTERM, and its whole process group with it."""
    port = free_port()
    env = {
        **os.environ,
        "HARDHAT_CHAIN_ID": str(chain_id),
        "HARDHAT_FUNDER_KEY": funder.key.hex(),
        "HARDHAT_DISABLE_TELEMETRY_PROMPT": "true",
    }
    proc = await asyncio.create_subprocess_exec(
        str(HARDHAT), "node", "--config", str(CONFIG), "--hostname", "127.0.0.1",
        "--port", str(port), cwd=CONFIG.parent, env=env, start_new_session=True,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        async with JsonRpcClient(url) as rpc:
            for _ in range(300):
                assert proc.returncode is None, "hardhat node exited"
                try:
                    assert await EthClient(rpc).chain_id() == chain_id
                    break
                except RpcTransportError:
                    await asyncio.sleep(0.1)
            else:
                raise AssertionError("hardhat node did not answer")
        yield url
    finally:
        if proc.returncode is None:
            os.killpg(proc.pid, signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), 15)


async def funded_keys(url: str, funder: LocalAccount, root: Path) -> Path:
    """The operator's keys as `entryway deploy` and `entryway bundler` read them, each
    account that sends transactions funded by a transfer from `funder`."""
    keys = root / "keys"
    keys.mkdir()
    async with JsonRpcClient(url) as rpc:
        pay = Transactor(EthClient(rpc), funder, CHAIN_ID)
        for name in ("operator", "signer", "notary", "executor"):
            key = Harness.new_key()
            (keys / f"{name}.key").write_text(key.key.hex() + "\n")
            if name != "signer":
                await pay.send(key.address, value=100 * ETHER)
            if name == "operator":
                (keys / "owner").write_text(key.address)
    return keys


async def deploy(url: str, keys: Path) -> None:
    address = {n: Account.from_key((keys / f"{n}.key").read_text().strip()).address
               for n in ("signer", "notary")}  # fmt: skip
    code, out = await run(
        "deploy", "--rpc-url", url, "--key-file", str(keys / "operator.key"),
        "--chain-id", str(CHAIN_ID), "--paymaster-signer", address["signer"],
        "--notary-submitter", address["notary"], "--paymaster-deposit-wei", str(ETHER),
        "--paymaster-stake-wei", str(ETHER // 10),
    )  # fmt: skip
    assert code == 0, out


@asynccontextmanager
async def bundler(url: str, keys: Path, *extra: str) -> AsyncIterator[str]:
    """`entryway bundler` on the node; its JSON-RPC URL once /healthz answers."""
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        ENTRYWAY, "bundler", "--rpc-url", url, "--executor-key-file",
        str(keys / "executor.key"), "--port", str(port), *extra,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        async with httpx.AsyncClient() as http:
            for _ in range(300):
                assert proc.returncode is None, "the bundler exited"
                try:
                    if (await http.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("the bundler did not come up")
        yield f"http://127.0.0.1:{port}/rpc"
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGINT)
            await asyncio.wait_for(proc.wait(), 15)


class BundlerClient:
    """The bundler's JSON-RPC as a wallet reaches it."""

    def __init__(self, url: str, entry_point: str) -> None:
        self.url = url
        self.entry_point = entry_point

    async def call(self, method: str, *params: Any) -> Any:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)}
        async with httpx.AsyncClient(timeout=DEADLINE_S) as http:
            answer = (await http.post(self.url, json=body)).json()
        assert "result" in answer, answer
        return answer["result"]

    async def included(self, op: UserOperation) -> dict[str, Any]:
        """Send `op`; its receipt once the bundler finds it on the chain."""
        op_hash = await self.call(
            "eth_sendUserOperation", user_operation_json(op), self.entry_point
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DEADLINE_S
        while (receipt := await self.call("eth_getUserOperationReceipt", op_hash)) is None:
            assert loop.time() < deadline, f"op {op_hash} not included"
            await asyncio.sleep(0.2)
        assert receipt["userOpHash"] == op_hash
        return dict(receipt)


async def test_gasless_flow_on_hardhat(tmp_path: Path) -> None:
    funder = Harness.new_key()
    async with hardhat_node(CHAIN_ID, funder) as url:
        keys = await funded_keys(url, funder, tmp_path)
        await deploy(url, keys)
        async with (
            bundler(
                url, keys, "--validation-mode", "untraced", "--deploy-entry-point"
            ) as bundler_url,
            JsonRpcClient(url) as rpc,
        ):
            eth = EthClient(rpc)
            h = harness_for(Deployed(url, tmp_path, keys), eth)
            client = BundlerClient(bundler_url, h.deployment.entry_point)
            assert h.deployment.entry_point in await client.call("eth_supportedEntryPoints")
            pay = Transactor(eth, funder, CHAIN_ID)

            # A wallet deployed by its first op, which it pays for itself.
            owner = h.new_key()
            first = await h.build_op(owner.address, b"")
            assert first.factory is not None and not await eth.get_code(first.sender)
            await pay.send(first.sender, value=ETHER)
            receipt = await client.included(h.sign(first, owner))
            assert receipt["success"] is True, receipt
            assert await eth.get_code(first.sender)
            await assert_mined(eth, receipt["receipt"]["transactionHash"])

            # The deployed wallet pays for an op that moves value out of it, its gas limits
            # the bundler's estimate, as a wallet asks for them.
            recipient = h.new_key().address
            moved = ACCOUNT.encode_call("execute", recipient, 12_345, b"")
            second = await h.build_op(owner.address, moved)
            assert second.factory is None
            limits = await client.call(
                "eth_estimateUserOperationGas", user_operation_json(second), client.entry_point
            )
            second = replace(
                second,
                pre_verification_gas=int(limits["preVerificationGas"], 16),
                verification_gas_limit=int(limits["verificationGasLimit"], 16),
                call_gas_limit=int(limits["callGasLimit"], 16),
            )
            receipt = await client.included(h.sign(second, owner))
            assert receipt["success"] is True, receipt
            assert await eth.get_balance(recipient) == 12_345
            await assert_mined(eth, receipt["receipt"]["transactionHash"])

            # A new wallet with no funds at all: the paymaster pays for its first op.
            deposit = await h.call(h.deployment.paymaster, PAYMASTER, "getDeposit")
            sponsored_owner = h.new_key()
            third = await h.build_op(sponsored_owner.address, b"")
            assert await eth.get_balance(third.sender) == 0
            receipt = await client.included(h.sign(h.sponsor(third), sponsored_owner))
            assert receipt["success"] is True, receipt
            assert receipt["paymaster"].lower() == h.deployment.paymaster.lower()
            assert await eth.get_code(third.sender)
            assert await eth.get_balance(third.sender) == 0
            spent = deposit - await h.call(h.deployment.paymaster, PAYMASTER, "getDeposit")
            assert spent == int(receipt["actualGasCost"], 16) > 0
            await assert_mined(eth, receipt["receipt"]["transactionHash"])


async def assert_mined(eth: EthClient, tx_hash: str) -> None:
    """The bundle's transaction as the node itself reports it: mined, and successful."""
    found = await eth.get_receipt(tx_hash)
    assert found is not None and found.succeeded, tx_hash


async def test_the_service_on_hardhat(tmp_path: Path) -> None:
    """`entryway serve` from a config file on the same node: its probe finds no tracer and
    the chain runs untraced by itself (nothing in the config pins a mode). Through the SDK, a
    new wallet is deployed by its first op, sponsored; funded by a plain transfer, it pays
    for its next op itself; then a recovery is started, delayed (`evm_increaseTime`) and
    finalized. The paymaster keeps the smaller stake `deploy` gives it: untraced, no rule
    asks more of it (it returns no context, and its reads of its own storage, which would
    need ERC-7562's MIN_STAKE, are seen only by a trace)."""
    funder = Harness.new_key()
    async with hardhat_node(CHAIN_ID, funder) as url, JsonRpcClient(url) as rpc:
        keys = await funded_keys(url, funder, tmp_path)
        await deploy(url, keys)
        eth = EthClient(rpc)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        proc = await serve(config(Deployed(url, tmp_path, keys), "hardhat"), port)
        try:
            key = await admin_key(sqlite_url(tmp_path / "data-hardhat"), "hardhat@example.org")
            auth = {"Authorization": f"Bearer {key}"}
            async with httpx.AsyncClient(base_url=base, headers=auth) as http:
                defaults = await http.get("/get-sdk-defaults", params={"chainId": CHAIN_ID})
                assert defaults.json()["validationMode"] == "untraced", defaults.text
                paymaster = defaults.json()["paymaster"]
            async with await Entryway.init(
                api_key=key, rpc_url=url, chain_id=CHAIN_ID, base_url=base
            ) as client:
                guardian = Account.create()
                wallet = await client.wallet(Account.create())
                receipt = await included(eth, await wallet.add_guardian(guardian.address))
                assert receipt.paymaster is not None
                assert receipt.paymaster.lower() == paymaster.lower()
                assert await wallet.is_deployed()

                await Transactor(eth, funder, CHAIN_ID).send(wallet.address, value=ETHER)
                recipient = Harness.new_key().address
                paid = await wallet.send({"to": recipient, "value": 12_345}, sponsored=False)
                receipt = await included(eth, paid)
                assert receipt.paymaster is None
                assert await eth.get_balance(recipient) == 12_345
                assert await eth.get_balance(wallet.address) < ETHER - 12_345

                new_owner = Account.create()
                approval = await wallet.recovery_approval(guardian, new_owner.address)
                await mined(await wallet.start_recovery(new_owner.address, [approval]))
                await rpc.request("evm_increaseTime", [DELAY + 1])
                await rpc.request("evm_mine")
                await mined(await wallet.finalize_recovery())
                assert (await wallet.info()).owner == new_owner.address
        finally:
            await stopped(proc)


async def included(eth: EthClient, op: PendingUserOperation) -> UserOperationReceipt:
    """`op`'s receipt from the service, successful, its bundle mined as the node says."""
    receipt = await op.wait(timeout=DEADLINE_S, poll_interval=0.3)
    assert receipt.success, receipt.reason
    await assert_mined(eth, receipt.transaction_hash)
    return receipt
