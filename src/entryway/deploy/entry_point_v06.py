"""EntryPoint v0.6 on a devnet, at its canonical address.

The npm release (`@account-abstraction/contracts@0.6.0`) compiles to code other than the
canonical deployment's, so no deterministic-deployer salt puts it at
0x5FF137D4b0FDCD49DcA30c7CF57E578a026d2789. The devnet deploys it at an address of its own,
then copies its runtime code there with `anvil_setCode`, and the storage its constructor
wrote with `anvil_setStorageAt`. The copy is faithful: the EntryPoint's constructor deploys
its SenderCreator, and the runtime code holds only that contract's address, which stays valid
wherever the code runs. Real chains already carry the canonical deployment.
"""

from __future__ import annotations

from entryway import contracts
from entryway.chain.rpc import JsonRpcClient
from entryway.deploy.deployer import ContractDeployer, DeploymentError
from entryway.deploy.plan import ContractPlan, plan_contract
from entryway.domain.entry_points import V06
from entryway.domain.evm import keccak

SOURCE_SALT = keccak(b"entryway.devnet.entry-point-v06")
# The constructor's storage writes land in the first slots (ReentrancyGuard's status).
_CONSTRUCTOR_SLOTS = 4


def source_plan() -> ContractPlan:
    """Where the devnet deploys the npm release before copying it (its own address)."""
    artifact = V06.artifact("EntryPoint")
    return plan_contract(
        "entryPointV06Source", artifact, SOURCE_SALT, contracts.load(artifact).bytecode
    )


async def place_entry_point_v06(rpc: JsonRpcClient, deployer: ContractDeployer) -> list[str]:
    """EntryPoint v0.6's npm code at its canonical address; what was done (nothing when it is
    there already). Refuses other code already at that address."""
    eth = deployer.eth
    artifact = contracts.load(V06.artifact("EntryPoint"))
    present = await eth.get_code(V06.address)
    if present:
        if not artifact.runtime_matches(present):
            raise DeploymentError(f"other code at the EntryPoint v0.6 address {V06.address}")
        return []
    plan = source_plan()
    await deployer.ensure(plan)
    runtime = await eth.get_code(plan.address)
    await rpc.request("anvil_setCode", [V06.address, "0x" + runtime.hex()])
    for slot in range(_CONSTRUCTOR_SLOTS):
        value = await rpc.request("eth_getStorageAt", [plan.address, hex(slot), "latest"])
        await rpc.request("anvil_setStorageAt", [V06.address, hex(slot), value])
    return [f"placed EntryPoint v0.6 at {V06.address} (its npm code, deployed at {plan.address})"]
