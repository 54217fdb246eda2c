"""Where every contract lands, computed offline: all deployments go through the deterministic
deployer (CREATE2), so an address depends only on the code, the constructor arguments and the
salt, and is the same on every chain."""

from __future__ import annotations

from dataclasses import dataclass

from eth_abi.abi import encode

from entryway import contracts
from entryway.domain.eip7702 import SIMPLE_7702_ACCOUNT
from entryway.domain.entry_points import V06, V07, V08, V09, EntryPointRelease
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
# (Each release's salt and address are in domain/entry_points.py.)
ENTRY_POINT_SALT = hex_to_bytes(V08.salt)
ENTRY_POINT_ADDRESS = V08.address

ENTRYWAY_SALT = keccak(b"entryway.contracts.v1")

# eth-infinitism's Simple7702Account (npm 0.8.0), the code an EIP-7702 EOA delegates to: its
# artifact through the deterministic deployer with the zero salt lands at the address it has on
# every public chain.
SIMPLE_7702_ACCOUNT_SALT = bytes(32)


@dataclass(frozen=True, slots=True)
class ContractPlan:
    name: str
    artifact: str
    address: str
    salt: bytes
    init_code: bytes  # empty: a release the chain must already carry (never deployed by us)

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
    """Entryway on EntryPoint v0.8, and beside it EntryPoints v0.7 and v0.9 (and v0.6 where the
    chain carries it), each with its own paymaster (same owner and signer) and the reference
    SimpleAccountFactory of its release."""

    entry_point: ContractPlan
    account_factory: ContractPlan
    paymaster: ContractPlan
    notary: ContractPlan
    entry_point_v07: ContractPlan
    paymaster_v07: ContractPlan
    simple_account_factory_v07: ContractPlan
    entry_point_v09: ContractPlan
    paymaster_v09: ContractPlan
    simple_account_factory_v09: ContractPlan
    simple_7702_account: ContractPlan
    # Bound to EntryPoint v0.6 at its canonical address, which no salt puts there: deployed
    # only on a chain that carries that EntryPoint (`ContractDeployer.deploy`).
    paymaster_v06: ContractPlan
    simple_account_factory_v06: ContractPlan

    def v06_contracts(self) -> tuple[ContractPlan, ...]:
        return (self.paymaster_v06, self.simple_account_factory_v06)

    def contracts(self) -> tuple[ContractPlan, ...]:
        """In deployment order: an EntryPoint before what is bound to it."""
        return (
            self.entry_point,
            self.account_factory,
            self.paymaster,
            self.notary,
            self.entry_point_v07,
            self.paymaster_v07,
            self.simple_account_factory_v07,
            self.entry_point_v09,
            self.paymaster_v09,
            self.simple_account_factory_v09,
            self.simple_7702_account,
        )


def plan_contract(name: str, artifact: str, salt: bytes, init_code: bytes) -> ContractPlan:
    address = create2_address(DETERMINISTIC_DEPLOYER, salt, init_code)
    return ContractPlan(name, artifact, address, salt, init_code)


def plan_entry_point(release: EntryPointRelease, address: str | None = None) -> ContractPlan:
    """The release's EntryPoint from its npm artifact, where the release's salt puts it: the
    canonical address, or the package's own when the package is not the release (v0.9's
    release candidate). `address` the canonical one of such a release: the chain already
    carries it, and it is checked, never deployed."""
    artifact = release.artifact("EntryPoint")
    name = "entryPoint" + release.artifact_suffix
    if release.packaged_address is not None and address == release.address:
        return ContractPlan(name, artifact, address, hex_to_bytes(release.salt), b"")
    plan = plan_contract(
        name, artifact, hex_to_bytes(release.salt), contracts.load(artifact).bytecode
    )
    if plan.address != (release.packaged_address or release.address):
        raise AssertionError(f"the {artifact} artifact is not the v{release.version} release")
    return plan


def plan_deployment(operator: Operator, *, entry_point_v09: str | None = None) -> DeploymentPlan:
    """Every contract of a deployment. EntryPoint v0.9 is planned at `entry_point_v09`: its
    canonical address on a chain that carries the release (`deployer.v09_entry_point_on`
    says), else (the default) where its npm release candidate lands."""
    entry_point, entry_point_v07 = plan_entry_point(V08), plan_entry_point(V07)
    ep_plan_v09 = plan_entry_point(V09, entry_point_v09)
    ep, ep_v07, ep_v09 = entry_point.address, entry_point_v07.address, ep_plan_v09.address

    def with_args(artifact: str, types: list[str], args: list[object]) -> bytes:
        return contracts.load(artifact).bytecode + encode(types, args)

    def paymaster(name: str, artifact: str, entry_point: str) -> ContractPlan:
        args: list[object] = [entry_point, operator.owner, operator.paymaster_signer]
        init_code = with_args(artifact, ["address", "address", "address"], args)
        return plan_contract(name, artifact, ENTRYWAY_SALT, init_code)

    def bound_to(name: str, artifact: str, entry_point: str) -> ContractPlan:
        init_code = with_args(artifact, ["address"], [entry_point])
        return plan_contract(name, artifact, ENTRYWAY_SALT, init_code)

    return DeploymentPlan(
        entry_point=entry_point,
        account_factory=bound_to("accountFactory", "AccountFactory", ep),
        paymaster=paymaster("paymaster", "VerifyingPaymaster", ep),
        notary=plan_contract(
            "notary",
            "NotaryAnchor",
            ENTRYWAY_SALT,
            with_args(
                "NotaryAnchor", ["address", "address"], [operator.owner, operator.notary_submitter]
            ),
        ),
        entry_point_v07=entry_point_v07,
        paymaster_v07=paymaster("paymasterV07", "VerifyingPaymasterV07", ep_v07),
        simple_account_factory_v07=bound_to(
            "simpleAccountFactoryV07", "SimpleAccountFactoryV07", ep_v07
        ),
        entry_point_v09=ep_plan_v09,
        paymaster_v09=paymaster("paymasterV09", "VerifyingPaymasterV09", ep_v09),
        simple_account_factory_v09=bound_to(
            "simpleAccountFactoryV09", "SimpleAccountFactoryV09", ep_v09
        ),
        simple_7702_account=plan_simple_7702_account(),
        paymaster_v06=paymaster("paymasterV06", "VerifyingPaymasterV06", V06.address),
        simple_account_factory_v06=bound_to(
            "simpleAccountFactoryV06", "SimpleAccountFactoryV06", V06.address
        ),
    )


def plan_simple_7702_account() -> ContractPlan:
    """Simple7702Account at its canonical address (it takes no constructor arguments)."""
    artifact = "Simple7702Account"
    init_code = contracts.load(artifact).bytecode
    plan = plan_contract("simple7702Account", artifact, SIMPLE_7702_ACCOUNT_SALT, init_code)
    if plan.address != SIMPLE_7702_ACCOUNT:
        raise AssertionError("the Simple7702Account artifact is not the npm 0.8.0 release")
    return plan
