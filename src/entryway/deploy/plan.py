"""Where every contract lands, computed offline: all deployments go through the deterministic
deployer (CREATE2), so an address depends only on the code, the constructor arguments and the
salt, and is the same on every chain."""

from __future__ import annotations

from dataclasses import dataclass

from eth_abi.abi import encode

from entryway import contracts
from entryway.domain.evm import create2_address, hex_to_bytes, keccak

# Arachnid's deterministic deployment proxy: `salt ++ initCode` in, CREATE2 out.
DETERMINISTIC_DEPLOYER = "0x4e59b44847b379578588920cA78FbF26c0B4956C"
# The keyless transaction that installs it on a chain that lacks it (no EIP-155 chain id, so
# it is valid everywhere), the account that sends it and what that account must hold.
DETERMINISTIC_DEPLOYER_SIGNER = "0x3fab184622dc19b6109349b94811493bf2a45362"
DETERMINISTIC_DEPLOYER_FUNDING_WEI = 100_000 * 100 * 10**9
DETERMINISTIC_DEPLOYER_TX = hex_to_bytes(
    "f8a58085174876e800830186a08080b853604580600e600039806000f350fe7fffffffffffffffffffffffff"
    "ffffffffffffffffffffffffffffffffffffffe03601600081602082378035828234f58015156039578182fd"
    "5b8082525050506014600cf31ba02222222222222222222222222222222222222222222222222222222222"
    "222222a02222222222222222222222222222222222222222222222222222222222222222"
)

# The salt eth-infinitism used for the EntryPoint v0.8 release: with the npm artifact's
# creation code it gives the canonical address below, byte-identical to every public chain.
ENTRY_POINT_SALT = hex_to_bytes("0a59dbff790c23c976a548690c27297883cc66b4c67024f9117b0238995e35e9")
ENTRY_POINT_ADDRESS = "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108"

ENTRYWAY_SALT = keccak(b"entryway.contracts.v1")


@dataclass(frozen=True, slots=True)
class ContractPlan:
    name: str
    artifact: str
    address: str
    salt: bytes
    init_code: bytes

    @property
    def deploy_data(self) -> bytes:
        """Call data for the deterministic deployer."""
        return self.salt + self.init_code


@dataclass(frozen=True, slots=True)
class Operator:
    """The operator's addresses baked into constructor arguments."""

    owner: str
    paymaster_signer: str
    notary_submitter: str


@dataclass(frozen=True, slots=True)
class DeploymentPlan:
    entry_point: ContractPlan
    account_factory: ContractPlan
    paymaster: ContractPlan
    notary: ContractPlan

    def contracts(self) -> tuple[ContractPlan, ...]:
        return (self.entry_point, self.account_factory, self.paymaster, self.notary)


def plan_contract(name: str, artifact: str, salt: bytes, init_code: bytes) -> ContractPlan:
    address = create2_address(DETERMINISTIC_DEPLOYER, salt, init_code)
    return ContractPlan(name, artifact, address, salt, init_code)


def plan_deployment(operator: Operator) -> DeploymentPlan:
    entry_point = plan_contract(
        "entryPoint", "EntryPoint", ENTRY_POINT_SALT, contracts.load("EntryPoint").bytecode
    )
    if entry_point.address != ENTRY_POINT_ADDRESS:
        raise AssertionError("the EntryPoint artifact is not the v0.8 release")
    ep = entry_point.address

    def with_args(artifact: str, types: list[str], args: list[object]) -> bytes:
        return contracts.load(artifact).bytecode + encode(types, args)

    return DeploymentPlan(
        entry_point=entry_point,
        account_factory=plan_contract(
            "accountFactory",
            "AccountFactory",
            ENTRYWAY_SALT,
            with_args("AccountFactory", ["address"], [ep]),
        ),
        paymaster=plan_contract(
            "paymaster",
            "VerifyingPaymaster",
            ENTRYWAY_SALT,
            with_args(
                "VerifyingPaymaster",
                ["address", "address", "address"],
                [ep, operator.owner, operator.paymaster_signer],
            ),
        ),
        notary=plan_contract(
            "notary",
            "NotaryAnchor",
            ENTRYWAY_SALT,
            with_args(
                "NotaryAnchor", ["address", "address"], [operator.owner, operator.notary_submitter]
            ),
        ),
    )
