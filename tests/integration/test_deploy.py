"""Deterministic, idempotent deployment: on the devnet, across restarts, and with
`entryway deploy` against a bare chain that lacks even the deterministic deployer."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.chain.transactor import Transactor
from entryway.deploy.deployer import ContractDeployer, check_requirements
from entryway.deploy.plan import DETERMINISTIC_DEPLOYER, plan_deployment
from entryway.devnet.anvil import AnvilConfig, AnvilProcess
from entryway.devnet.devnet import Devnet
from tests.integration.harness import NOTARY, Harness

ENTRYWAY = str(Path(sys.executable).with_name("entryway"))


async def run_cli(*args: str) -> tuple[int, list[dict[str, object]], str]:
    proc = await asyncio.create_subprocess_exec(
        ENTRYWAY, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    lines = [json.loads(line) for line in out.decode().splitlines() if line.strip()]
    assert proc.returncode is not None
    return proc.returncode, lines, err.decode()


async def test_second_deploy_finds_everything_in_place(harness: Harness, devnet: Devnet) -> None:
    deployer = ContractDeployer(harness.eth, Transactor(harness.eth, devnet.keys.operator, 80002))
    plan = plan_deployment(devnet.keys.operator_addresses)
    deployment, done = await deployer.deploy(plan)
    assert done == []
    assert deployment == harness.deployment


async def test_devnet_state_survives_a_restart(tmp_path: Path) -> None:
    root = os.urandom(32)
    async with Devnet(tmp_path, [84532]) as first:
        chain = first.chains[0]
        assert any("entryPoint" in step for step in chain.provisioned)
        async with JsonRpcClient(chain.rpc_url) as rpc:
            submitter = Transactor(EthClient(rpc), first.keys.notary_submitter, 84532)
            await submitter.send(chain.deployment.notary, NOTARY.encode_call("anchor", root, 1))
    async with Devnet(tmp_path, [84532]) as second:
        again = second.chains[0]
        assert again.deployment == chain.deployment
        assert again.provisioned == ()
        async with JsonRpcClient(again.rpc_url) as rpc:
            raw = await EthClient(rpc).call(
                again.deployment.notary, NOTARY.encode_call("anchoredAt", root)
            )
            assert NOTARY.decode_output("anchoredAt", raw)[0] > 0


async def test_deploy_command_brings_up_a_bare_chain(tmp_path: Path) -> None:
    node = AnvilProcess(AnvilConfig(chain_id=8453, default_create2_deployer=False))
    await node.start()
    try:
        async with JsonRpcClient(node.rpc_url) as rpc:
            eth = EthClient(rpc)
            assert await eth.get_code(DETERMINISTIC_DEPLOYER) == b""
            key = Harness.new_key()
            await rpc.request("anvil_setBalance", [key.address, hex(10**20)])
            key_file = tmp_path / "operator.key"
            key_file.write_text(key.key.hex())

            code, lines, err = await run_cli(
                "deploy",
                "--rpc-url",
                node.rpc_url,
                "--key-file",
                str(key_file),
                "--chain-id",
                "8453",
            )
            assert code == 0, err
            checks = [line for line in lines if "requirement" in line]
            assert [c["ok"] for c in checks] == [True, True, True]
            done = [line["done"] for line in lines if "done" in line]
            assert done[0] == "installed the deterministic deployer"
            assert len(done) == 5
            result = lines[-1]
            assert await eth.get_code(DETERMINISTIC_DEPLOYER) != b""

            # Addresses are computable offline, and match what landed.
            _, (offline,), _ = await run_cli("addresses", "--owner", key.address)
            for name in ("entryPoint", "accountFactory", "paymaster", "notary"):
                assert result[name] == offline[name]
                assert await eth.get_code(str(result[name])) != b""

            code, lines, err = await run_cli(
                "deploy", "--rpc-url", node.rpc_url, "--key-file", str(key_file)
            )
            assert code == 0, err
            assert not [line for line in lines if "done" in line]
            assert lines[-1] == result
    finally:
        await node.stop()


async def test_deploy_refuses_a_chain_id_mismatch(devnet: Devnet, tmp_path: Path) -> None:
    key_file = tmp_path / "operator.key"
    key_file.write_text(Harness.new_key().key.hex())
    rpc_url = devnet.chains[0].rpc_url
    code, lines, err = await run_cli(
        "deploy", "--rpc-url", rpc_url, "--key-file", str(key_file), "--chain-id", "137"
    )
    assert code == 1
    mismatch = next(line for line in lines if line["requirement"] == "chain id matches")
    assert mismatch["ok"] is False
    assert "answers chain id 80002, expected 137" in str(mismatch["detail"])
    assert "network requirements not met: chain id matches" in err


async def test_deploy_reports_an_unreachable_rpc(tmp_path: Path) -> None:
    key_file = tmp_path / "operator.key"
    key_file.write_text(Harness.new_key().key.hex())
    code, lines, _ = await run_cli(
        "deploy", "--rpc-url", "http://127.0.0.1:9", "--key-file", str(key_file)
    )
    assert code == 1
    assert lines == [] or lines[0]["ok"] is False


async def test_foreign_code_at_the_entry_point_address_is_refused(tmp_path: Path) -> None:
    node = AnvilProcess(AnvilConfig(chain_id=84532))
    await node.start()
    try:
        async with JsonRpcClient(node.rpc_url) as rpc:
            eth = EthClient(rpc)
            key = Harness.new_key()
            plan = plan_deployment(Devnet(tmp_path, [84532]).keys.operator_addresses)
            await rpc.request("anvil_setCode", [plan.entry_point.address, "0x6001600055"])
            checks = await check_requirements(eth, 84532, plan)
            assert checks[-1].ok is False
            assert checks[-1].detail == "other code at the EntryPoint address"
            await rpc.request("anvil_setBalance", [key.address, hex(10**20)])
            deployer = ContractDeployer(eth, Transactor(eth, key, 84532))
            try:
                await deployer.ensure(plan.entry_point)
            except Exception as exc:
                assert "refusing to use it" in str(exc)
            else:
                raise AssertionError("foreign code was accepted as the EntryPoint")
    finally:
        await node.stop()
