"""The gasless flow on a node that is not anvil: Hardhat's node (its EDR engine, from npm),
started here as Base Sepolia with one funded account and nothing of Entryway's. Every other
account is funded by a plain transfer, as on a real chain; `entryway deploy` puts the
contracts on it and `entryway bundler` serves it, both as an operator runs them. Then a
wallet is deployed by its first op, the wallet pays for a second op itself (its gas limits
estimated by the bundler), and a third op from a new, empty wallet is paid by the deployed
paymaster: each is included, as the EntryPoint's UserOperationEvent and the bundle's
transaction receipt say.

Hardhat's `debug_traceCall` ignores state overrides and takes no named tracer
(docs/devnets.md, "A second node implementation"): the bundler's probe finds no tracer it can
judge by, and a standalone bundler then starts only when told to run untraced
(`--validation-mode untraced`): the EntryPoint's own checks, without ERC-7562's. It is
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
from eth_account import Account
from eth_account.signers.local import LocalAccount

from entryway.bundler.rpc_types import user_operation_json
from entryway.chain.rpc import EthClient, JsonRpcClient, RpcTransportError
from entryway.chain.transactor import Transactor
from entryway.devnet.anvil import free_port
from entryway.domain.userop import UserOperation
from tests.integration.harness import ACCOUNT, ETHER, PAYMASTER, Harness
from tests.integration.test_bundler_failover import harness_for
from tests.integration.test_config_processes import CHAIN_ID, ENTRYWAY, Deployed, run

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
            await assert_mined(eth, receipt)

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
            await assert_mined(eth, receipt)

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
            await assert_mined(eth, receipt)


async def assert_mined(eth: EthClient, receipt: dict[str, Any]) -> None:
    """The bundle's transaction as the node itself reports it: mined, and successful."""
    tx_hash = receipt["receipt"]["transactionHash"]
    mined = await eth.get_receipt(tx_hash)
    assert mined is not None and mined.succeeded, tx_hash
