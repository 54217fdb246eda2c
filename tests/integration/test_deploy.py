"""Deterministic, idempotent deployment: on the devnet, across restarts, and with
`entryway deploy` against a bare chain that lacks even the deterministic deployer."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest
from eth_abi.abi import encode

from entryway import contracts
from entryway.chain.rpc import EthClient, JsonRpcClient, RpcError
from entryway.chain.transactor import Transactor
from entryway.deploy.deployer import ContractDeployer, check_requirements
from entryway.deploy.plan import DETERMINISTIC_DEPLOYER, plan_deployment
from entryway.devnet.anvil import AnvilConfig, AnvilProcess
from entryway.devnet.devnet import DEVNET_PAYMASTER_FUNDING, Devnet
from entryway.domain.entry_points import V06, V07, V08, V09, EntryPointRelease
from tests.integration.harness import NOTARY, Harness

ENTRYWAY = str(Path(sys.executable).with_name("entryway"))
EP_V07 = contracts.load("EntryPointV07").abi
FACTORY_V07 = contracts.load("SimpleAccountFactoryV07").abi
PAYMASTER_V07 = contracts.load("VerifyingPaymasterV07").abi
PAYMASTER_V06 = contracts.load("VerifyingPaymasterV06").abi
FACTORY_V06 = contracts.load("SimpleAccountFactoryV06").abi


async def deposit_info(eth: EthClient, entry_point: str, paymaster: str) -> tuple[int, int, int]:
    """The paymaster's deposit, stake and unstake delay at `entry_point`."""
    raw = await eth.call(entry_point, EP_V07.encode_call("getDepositInfo", paymaster))
    deposit, _staked, stake, delay, _withdraw = EP_V07.decode_output("getDepositInfo", raw)[0]
    return deposit, stake, delay


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


async def test_the_devnet_serves_entry_point_v07_beside_v08(
    harness: Harness, devnet: Devnet
) -> None:
    eth, deployment = harness.eth, harness.deployment
    assert deployment.entry_point == V08.address
    assert deployment.entry_point_v07 == V07.address
    assert deployment.paymaster_v07 is not None
    assert deployment.simple_account_factory_v07 is not None
    assert runtime_matches(await eth.get_code(V07.address), "EntryPointV07")
    assert runtime_matches(await eth.get_code(deployment.paymaster_v07), "VerifyingPaymasterV07")
    factory = deployment.simple_account_factory_v07
    assert runtime_matches(await eth.get_code(factory), "SimpleAccountFactoryV07")
    # Bound to v0.7, owned and signed for by the operator, as v0.8's paymaster is.
    raw = await eth.call(deployment.paymaster_v07, PAYMASTER_V07.encode_call("entryPoint"))
    assert PAYMASTER_V07.decode_output("entryPoint", raw)[0] == V07.address
    raw = await eth.call(deployment.paymaster_v07, PAYMASTER_V07.encode_call("owner"))
    assert PAYMASTER_V07.decode_output("owner", raw)[0] == devnet.keys.operator.address
    signer = devnet.keys.paymaster_signer.address
    raw = await eth.call(deployment.paymaster_v07, PAYMASTER_V07.encode_call("isSigner", signer))
    assert PAYMASTER_V07.decode_output("isSigner", raw)[0] is True
    raw = await eth.call(factory, FACTORY_V07.encode_call("getAddress", signer, 0))
    assert FACTORY_V07.decode_output("getAddress", raw)[0] != "0x" + "00" * 20
    # Funded at the v0.7 EntryPoint, as the v0.8 paymaster is at v0.8's.
    funding = DEVNET_PAYMASTER_FUNDING
    for entry_point, paymaster in (
        (deployment.entry_point, deployment.paymaster),
        (V07.address, deployment.paymaster_v07),
    ):
        deposit, stake, delay = await deposit_info(eth, entry_point, paymaster)
        assert deposit >= funding.deposit_wei // 2, entry_point
        assert stake >= funding.stake_wei and delay >= funding.unstake_delay_s, entry_point
    json = devnet.chains[0].as_json()
    assert json["entryPointV07"] == V07.address
    assert json["paymasterV07"] == deployment.paymaster_v07
    assert json["simpleAccountFactoryV07"] == factory


async def test_the_devnet_serves_entry_point_v06_with_our_paymaster_and_its_factory(
    harness: Harness, devnet: Devnet
) -> None:
    eth, deployment = harness.eth, harness.deployment
    assert deployment.entry_point_v06 == V06.address
    paymaster, factory = deployment.paymaster_v06, deployment.simple_account_factory_v06
    assert paymaster is not None and factory is not None
    assert runtime_matches(await eth.get_code(paymaster), "VerifyingPaymasterV06")
    assert runtime_matches(await eth.get_code(factory), "SimpleAccountFactoryV06")
    # Bound to v0.6, owned and signed for by the operator, staked and funded there.
    raw = await eth.call(paymaster, PAYMASTER_V06.encode_call("entryPoint"))
    assert PAYMASTER_V06.decode_output("entryPoint", raw)[0] == V06.address
    raw = await eth.call(paymaster, PAYMASTER_V06.encode_call("owner"))
    assert PAYMASTER_V06.decode_output("owner", raw)[0] == devnet.keys.operator.address
    signer = devnet.keys.paymaster_signer.address
    raw = await eth.call(paymaster, PAYMASTER_V06.encode_call("isSigner", signer))
    assert PAYMASTER_V06.decode_output("isSigner", raw)[0] is True
    deposit, stake, delay = await deposit_info(eth, V06.address, paymaster)
    funding = DEVNET_PAYMASTER_FUNDING
    assert deposit >= funding.deposit_wei // 2
    assert stake >= funding.stake_wei and delay >= funding.unstake_delay_s
    raw = await eth.call(factory, FACTORY_V06.encode_call("accountImplementation"))
    assert FACTORY_V06.decode_output("accountImplementation", raw)[0] != "0x" + "00" * 20
    json = devnet.chains[0].as_json()
    assert (json["entryPointV06"], json["paymasterV06"]) == (V06.address, paymaster)
    assert json["simpleAccountFactoryV06"] == factory


@pytest.mark.parametrize(
    ("artifact", "own", "other"),
    [("VerifyingPaymasterV07", V07, V08), ("VerifyingPaymaster", V08, V07)],
)
async def test_a_paymaster_is_bound_to_its_entry_point_release(
    harness: Harness, artifact: str, own: EntryPointRelease, other: EntryPointRelease
) -> None:
    owner = harness.operator.address

    def init_code(entry_point: str) -> bytes:
        args = encode(["address", "address", "address"], [entry_point, owner, owner])
        return contracts.load(artifact).bytecode + args

    code = await harness.eth.call(None, init_code(own.address), sender=owner)
    assert contracts.load(artifact).runtime_matches(code)
    with pytest.raises(RpcError, match="interface mismatch"):
        await harness.eth.call(None, init_code(other.address), sender=owner)


def runtime_matches(code: bytes, artifact: str) -> bool:
    return contracts.load(artifact).runtime_matches(code)


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
                "--paymaster-deposit-wei",
                str(3 * 10**16),
                "--paymaster-stake-wei",
                str(10**16),
            )
            assert code == 0, err
            checks = [line for line in lines if "requirement" in line]
            assert [c["ok"] for c in checks] == [True] * 8
            assert [c["requirement"] for c in checks][2:] == [
                "chain active (fresh head)",
                "RPC endpoint stable",
                "EntryPoint v0.8 present or deployable",
                "EntryPoint v0.7 present or deployable",
                "EntryPoint v0.9 present or deployable",
                "EntryPoint v0.6 present or absent",
            ]
            assert "cannot be deployed at its canonical address" in str(checks[7]["detail"])  # v0.6
            assert "block time 2 s" in str(checks[2]["detail"])  # Base's, from the registry
            assert "5/5 probes answered" in str(checks[3]["detail"])
            done = [line["done"] for line in lines if "done" in line]
            assert done[0] == "installed the deterministic deployer"
            assert len([d for d in done if d.startswith("deployed ")]) == 11
            result = lines[-1]
            assert await eth.get_code(DETERMINISTIC_DEPLOYER) != b""
            assert result["entryPoint"] == V08.address
            assert result["entryPointV07"] == V07.address
            assert result["entryPointV09"] == V09.packaged_address  # no v0.9 release here

            # Addresses are computable offline, and match what landed.
            _, (offline,), _ = await run_cli("addresses", "--owner", key.address)
            names = ("entryPoint", "accountFactory", "paymaster", "notary")
            names += ("entryPointV07", "paymasterV07", "simpleAccountFactoryV07")
            names += ("entryPointV09", "paymasterV09", "simpleAccountFactoryV09")
            names += ("simple7702Account",)
            # v0.6's too, deployed only beside an EntryPoint v0.6, which this chain lacks.
            v06 = ("paymasterV06", "simpleAccountFactoryV06")
            assert set(offline) == {*names, *v06}
            assert not set(v06) & set(result)
            for name in v06:
                assert await eth.get_code(str(offline[name])) == b""
            for name in names:
                assert result[name] == offline[name]
                assert await eth.get_code(str(result[name])) != b""

            # Each paymaster is funded at its own EntryPoint.
            for entry_point, paymaster in (
                ("entryPoint", "paymaster"),
                ("entryPointV07", "paymasterV07"),
                ("entryPointV09", "paymasterV09"),
            ):
                deposit, stake, delay = await deposit_info(
                    eth, str(result[entry_point]), str(result[paymaster])
                )
                assert (deposit, stake, delay) == (3 * 10**16, 10**16, 86_400), paymaster

            code, lines, err = await run_cli(
                "deploy", "--rpc-url", node.rpc_url, "--key-file", str(key_file)
            )
            assert code == 0, err
            assert not [line for line in lines if "done" in line]
            assert lines[-1] == result
    finally:
        await node.stop()


async def test_deploy_funds_a_deposit_without_a_stake(tmp_path: Path) -> None:
    """A deposit asked for alone leaves the paymasters unstaked: nothing to stake is no
    `addStake`, which the EntryPoint reverts without value ("no stake specified")."""
    node = AnvilProcess(AnvilConfig(chain_id=84532))
    await node.start()
    try:
        async with JsonRpcClient(node.rpc_url) as rpc:
            eth = EthClient(rpc)
            key = Harness.new_key()
            await rpc.request("anvil_setBalance", [key.address, hex(10**20)])
            key_file = tmp_path / "operator.key"
            key_file.write_text(key.key.hex())
            deploy = ("deploy", "--rpc-url", node.rpc_url, "--key-file", str(key_file))
            code, lines, err = await run_cli(*deploy, "--paymaster-deposit-wei", str(10**16))
            assert code == 0, err
            assert not [line for line in lines if "staked" in str(line.get("done"))]
            result = lines[-1]
            info = await deposit_info(eth, str(result["entryPoint"]), str(result["paymaster"]))
            assert info == (10**16, 0, 0)
    finally:
        await node.stop()


async def test_the_standalone_bundler_deploys_both_entry_points_when_asked() -> None:
    from entryway.bundler.standalone import StandaloneSettings, build_bundler

    node = AnvilProcess(AnvilConfig(chain_id=8453, default_create2_deployer=False))
    await node.start()
    try:
        async with JsonRpcClient(node.rpc_url) as rpc:
            eth = EthClient(rpc)
            key = Harness.new_key()
            await rpc.request("anvil_setBalance", [key.address, hex(10**20)])
            settings = StandaloneSettings(
                rpc_url=node.rpc_url,
                entry_point=V08.address,
                executor_keys=(key,),
                deploy_entry_point=True,
            )
            await build_bundler(eth, settings)
            assert runtime_matches(await eth.get_code(V08.address), "EntryPoint")
            assert runtime_matches(await eth.get_code(V07.address), "EntryPointV07")
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
            await rpc.request("anvil_setCode", [plan.entry_point_v07.address, "0x6001600055"])
            await rpc.request("anvil_setCode", [V06.address, "0x6001600055"])
            checks = {c.requirement: c for c in await check_requirements(eth, 84532, plan)}
            v06 = checks["EntryPoint v0.6 present or absent"]
            assert (v06.ok, v06.detail) == (False, "other code at the EntryPoint v0.6 address")
            for version in ("v0.8", "v0.7"):
                check = checks[f"EntryPoint {version} present or deployable"]
                assert check.ok is False
                assert check.detail == f"other code at the EntryPoint {version} address"
            await rpc.request("anvil_setBalance", [key.address, hex(10**20)])
            deployer = ContractDeployer(eth, Transactor(eth, key, 84532))
            for entry_point in (plan.entry_point, plan.entry_point_v07):
                try:
                    await deployer.ensure(entry_point)
                except Exception as exc:
                    assert "refusing to use it" in str(exc)
                else:
                    raise AssertionError(f"foreign code was accepted as {entry_point.artifact}")
    finally:
        await node.stop()
