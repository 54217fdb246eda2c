"""EntryPoint v0.9 on a new network: where the chain carries the release (public chains) it
is checked and served at its canonical address, and v0.9's paymaster and factory bind to it;
where it does not (devnets), its npm release candidate is deployed where the release's salt
puts it."""

from __future__ import annotations

from pathlib import Path

import pytest

from entryway import contracts
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.chain.transactor import Transactor
from entryway.deploy.deployer import (
    ContractDeployer,
    DeploymentError,
    PaymasterFunding,
    check_requirements,
    v09_entry_point_on,
)
from entryway.deploy.plan import Operator, plan_deployment
from entryway.devnet.anvil import AnvilConfig, AnvilProcess
from entryway.devnet.devnet import Devnet
from entryway.domain.entry_points import V09
from entryway.domain.evm import to_hex
from tests.integration.harness import Harness

PAYMASTER_V09 = contracts.load("VerifyingPaymasterV09").abi
FACTORY_V09 = contracts.load("SimpleAccountFactoryV09").abi


def test_the_release_candidate_lands_off_the_canonical_address() -> None:
    """With the release's salt, rc.1's creation code (24,612 bytes, not the release's
    24,855) lands at its own address; the plan names the canonical one only when asked."""
    assert len(contracts.load("EntryPointV09").bytecode) == 24_612
    operator = Operator(*(Harness.new_key().address for _ in range(3)))
    default = plan_deployment(operator)
    assert default.entry_point_v09.address == V09.packaged_address
    assert default.entry_point_v09.init_code  # deployable
    canonical = plan_deployment(operator, entry_point_v09=V09.address)
    assert canonical.entry_point_v09.address == V09.address
    assert canonical.entry_point_v09.init_code == b""  # only checked, never deployed
    assert canonical.paymaster_v09.address != default.paymaster_v09.address  # bound to it


async def test_the_devnet_serves_v09_with_its_paymaster(harness: Harness, devnet: Devnet) -> None:
    deployment = harness.deployment
    assert deployment.entry_point_v09 == V09.packaged_address
    assert deployment.paymaster_v09 is not None
    raw = await harness.eth.call(deployment.paymaster_v09, PAYMASTER_V09.encode_call("entryPoint"))
    assert PAYMASTER_V09.decode_output("entryPoint", raw)[0] == V09.packaged_address
    signer = devnet.keys.paymaster_signer.address
    raw = await harness.eth.call(
        deployment.paymaster_v09, PAYMASTER_V09.encode_call("isSigner", signer)
    )
    assert PAYMASTER_V09.decode_output("isSigner", raw)[0] is True


async def test_a_chain_carrying_the_release_is_served_at_the_canonical_address(
    tmp_path: Path,
) -> None:
    node = AnvilProcess(AnvilConfig(chain_id=84532))
    await node.start()
    try:
        async with JsonRpcClient(node.rpc_url) as rpc:
            eth = EthClient(rpc)
            key = Harness.new_key()
            await rpc.request("anvil_setBalance", [key.address, hex(10**20)])
            operator = Operator(key.address, key.address, key.address)
            deployer = ContractDeployer(eth, Transactor(eth, key, 84532))

            # The release is not there: the canonical address cannot be deployed to.
            assert await v09_entry_point_on(eth) == V09.packaged_address
            canonical = plan_deployment(operator, entry_point_v09=V09.address)
            with pytest.raises(DeploymentError, match="none to deploy"):
                await deployer.ensure(canonical.entry_point_v09)
            checks = await check_requirements(eth, 84532, canonical)
            [v09] = [c for c in checks if "v0.9" in c.requirement]
            assert not v09.ok and V09.address in v09.detail

            # A chain that carries it (as public chains do; the release's own code stands in).
            runtime = contracts.load("EntryPointV09").deployed_bytecode
            await rpc.request("anvil_setCode", [V09.address, to_hex(runtime)])
            at = await v09_entry_point_on(eth)
            assert at == V09.address
            plan = plan_deployment(operator, entry_point_v09=at)
            funding = PaymasterFunding(10**16, 0, 0)
            deployment, done = await deployer.deploy(plan, funding)
            assert deployment.entry_point_v09 == V09.address
            assert not await eth.get_code(V09.packaged_address)  # rc.1 not deployed
            assert not any(V09.address in step for step in done if step.startswith("deployed"))
            assert deployment.paymaster_v09 is not None
            raw = await eth.call(deployment.paymaster_v09, PAYMASTER_V09.encode_call("entryPoint"))
            assert PAYMASTER_V09.decode_output("entryPoint", raw)[0] == V09.address
            assert any("paymasterV09" in step for step in done if step.startswith("deposited"))
    finally:
        await node.stop()
