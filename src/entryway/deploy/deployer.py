"""Brings a chain up to a full Entryway deployment, idempotently: what is in place is checked
and kept, what is missing is deployed through the deterministic deployer."""

from __future__ import annotations

import time
from dataclasses import dataclass

from eth_abi.abi import encode

from entryway import contracts
from entryway.chain.entry_point_v06 import answers_as_v06
from entryway.chain.rpc import EthClient, RpcError, RpcTransportError
from entryway.chain.transactor import Transactor
from entryway.deploy.plan import (
    DETERMINISTIC_DEPLOYER,
    DETERMINISTIC_DEPLOYER_FUNDING_WEI,
    DETERMINISTIC_DEPLOYER_SIGNER,
    DETERMINISTIC_DEPLOYER_TX,
    ENTRYWAY_SALT,
    ContractPlan,
    DeploymentPlan,
    plan_contract,
)
from entryway.deploy.rpc_health import (
    FALLBACK_BLOCK_TIME_S,
    RpcHealthThresholds,
    block_time_s,
    head_freshness,
    probe_stability,
    stability,
)
from entryway.domain.eip7702 import SIMPLE_7702_ACCOUNT
from entryway.domain.entry_points import V06, V07, V08, V09, EntryPointRelease
from entryway.errors import EntrywayError


class DeploymentError(EntrywayError):
    pass


# The devnets' stand-in for a Chainlink price feed of the native token in EUR, with the
# 8 decimals of Chainlink's fiat feeds.
DEVNET_FEED_DECIMALS = 8


def devnet_price_feed_plan(owner: str, native_token: str, micro_eur: int) -> ContractPlan:
    """A `DevnetPriceFeed` answering `micro_eur` micro-euros per token, set by `owner`. Its
    address follows from the price: a new configured price deploys a new feed."""
    answer = micro_eur * 10**DEVNET_FEED_DECIMALS // 10**6
    init_code = contracts.load("DevnetPriceFeed").bytecode + encode(
        ["address", "uint8", "int256", "string"],
        [owner, DEVNET_FEED_DECIMALS, answer, f"{native_token} / EUR"],
    )
    return plan_contract("priceFeed", "DevnetPriceFeed", ENTRYWAY_SALT, init_code)


@dataclass(frozen=True, slots=True)
class Deployment:
    """Where a chain's contracts are. The v0.7 and v0.9 ones are absent from a deployment
    configured without them."""

    chain_id: int
    entry_point: str
    account_factory: str
    paymaster: str
    notary: str
    entry_point_v07: str | None = None
    paymaster_v07: str | None = None
    simple_account_factory_v07: str | None = None
    entry_point_v09: str | None = None
    paymaster_v09: str | None = None
    simple_account_factory_v09: str | None = None
    # EntryPoint v0.6 (its canonical address) where the chain carries it.
    entry_point_v06: str | None = None
    paymaster_v06: str | None = None
    simple_account_factory_v06: str | None = None
    # What an EIP-7702 EOA delegates to: the same address on every chain.
    simple_7702_account: str = SIMPLE_7702_ACCOUNT

    def as_json(self, rpc_url: str) -> dict[str, object]:
        out: dict[str, object] = {
            "chainId": self.chain_id,
            "rpcUrl": rpc_url,
            "entryPoint": self.entry_point,
            "accountFactory": self.account_factory,
            "paymaster": self.paymaster,
            "notary": self.notary,
            "simple7702Account": self.simple_7702_account,
        }
        for key, address in (
            ("entryPointV07", self.entry_point_v07),
            ("paymasterV07", self.paymaster_v07),
            ("simpleAccountFactoryV07", self.simple_account_factory_v07),
            ("entryPointV09", self.entry_point_v09),
            ("paymasterV09", self.paymaster_v09),
            ("simpleAccountFactoryV09", self.simple_account_factory_v09),
            ("entryPointV06", self.entry_point_v06),
            ("paymasterV06", self.paymaster_v06),
            ("simpleAccountFactoryV06", self.simple_account_factory_v06),
        ):
            if address is not None:
                out[key] = address
        return out

    def other_paymasters(self) -> dict[str, str]:
        """The paymaster contract of each EntryPoint besides v0.8's: EntryPoint -> paymaster."""
        return {
            entry_point: paymaster
            for entry_point, paymaster in (
                (self.entry_point_v07, self.paymaster_v07),
                (self.entry_point_v09, self.paymaster_v09),
                (self.entry_point_v06, self.paymaster_v06),
            )
            if entry_point is not None and paymaster is not None
        }

    def service_paymaster_of(self, op_paymaster: str | None) -> str:
        """The service's paymaster contract an op names (there is one per EntryPoint), or
        v0.8's when it names none of them."""
        for paymaster in (self.paymaster, *self.other_paymasters().values()):
            if op_paymaster is not None and paymaster.lower() == op_paymaster.lower():
                return paymaster
        return self.paymaster

    @property
    def own_entities(self) -> tuple[str, ...]:
        """The operator's own factories and paymasters: trusted by its bundler."""
        found = (
            self.account_factory,
            self.paymaster,
            self.paymaster_v07,
            self.simple_account_factory_v07,
        )
        return tuple(a for a in found if a is not None)

    @classmethod
    def of_plan(cls, chain_id: int, plan: DeploymentPlan, *, with_v06: bool = False) -> Deployment:
        """`with_v06`: the chain carries EntryPoint v0.6, and the plan's v0.6 contracts are
        deployed beside it."""
        v06 = (
            {
                "entry_point_v06": V06.address,
                "paymaster_v06": plan.paymaster_v06.address,
                "simple_account_factory_v06": plan.simple_account_factory_v06.address,
            }
            if with_v06
            else {}
        )
        return cls(
            chain_id=chain_id,
            entry_point=plan.entry_point.address,
            account_factory=plan.account_factory.address,
            paymaster=plan.paymaster.address,
            notary=plan.notary.address,
            entry_point_v07=plan.entry_point_v07.address,
            paymaster_v07=plan.paymaster_v07.address,
            simple_account_factory_v07=plan.simple_account_factory_v07.address,
            entry_point_v09=plan.entry_point_v09.address,
            paymaster_v09=plan.paymaster_v09.address,
            simple_account_factory_v09=plan.simple_account_factory_v09.address,
            simple_7702_account=plan.simple_7702_account.address,
            **v06,
        )


@dataclass(frozen=True, slots=True)
class RequirementCheck:
    requirement: str
    ok: bool
    detail: str


@dataclass(frozen=True, slots=True)
class PaymasterFunding:
    """What the paymaster should hold at the EntryPoint, in wei."""

    deposit_wei: int
    stake_wei: int
    unstake_delay_s: int


def runtime_code_matches(artifact: str, code: bytes) -> bool:
    """Whether on-chain `code` is `artifact`'s runtime code. Immutables differ by chain (the
    EntryPoint caches its EIP-712 domain and its SenderCreator's address), so they are masked."""
    return contracts.load(artifact).runtime_matches(code)


async def check_requirements(
    eth: EthClient,
    expected_chain_id: int,
    plan: DeploymentPlan,
    thresholds: RpcHealthThresholds | None = None,
    *,
    probe: EthClient | None = None,
) -> list[RequirementCheck]:
    """The requirements for an additional network (docs/requirements.md §1.2): EVM-compatible,
    its RPC answering with the expected chain id, the chain active (a fresh head) with a
    stable endpoint (`thresholds`; probed through `probe`, a client that does not retry,
    else `eth`), and each EntryPoint release (v0.8, v0.7, v0.9) present or deployable."""
    try:
        chain_id = await eth.chain_id()
        block = await eth.get_block("latest")
        await eth.get_code(DETERMINISTIC_DEPLOYER)
    except (RpcTransportError, RpcError) as exc:
        return [RequirementCheck("EVM-compatible RPC endpoint", False, str(exc))]
    checks = [
        RequirementCheck(
            "EVM-compatible RPC endpoint",
            "baseFeePerGas" in block,
            f"answers eth_chainId, eth_getBlockByNumber and eth_getCode at block "
            f"{int(block['number'], 16)}"
            + ("" if "baseFeePerGas" in block else "; but no EIP-1559 base fee"),
        ),
        RequirementCheck(
            "chain id matches",
            chain_id == expected_chain_id,
            f"RPC answers chain id {chain_id}, expected {expected_chain_id}",
        ),
    ]
    checks += await _activity_checks(eth, probe or eth, expected_chain_id, block, thresholds)
    for release, entry_point in (
        (V08, plan.entry_point),
        (V07, plan.entry_point_v07),
        (V09, plan.entry_point_v09),
    ):
        checks.append(await _entry_point_check(eth, release, entry_point))
    checks.append(await _entry_point_v06_check(eth, chain_id))
    return checks


async def _entry_point_v06_check(eth: EthClient, chain_id: int) -> RequirementCheck:
    """v0.6 is served where the chain carries it; no salt puts it at its canonical address,
    so it is never deployed, and its absence is no failure."""
    what = "EntryPoint v0.6"
    if not await eth.get_code(V06.address):
        detail = (
            f"no {what}: it cannot be deployed at its canonical address, "
            "so v0.6 ops are not served on this network"
        )
        return RequirementCheck(f"{what} present or absent", True, detail)
    if await answers_as_v06(eth, V06.address, chain_id):
        return RequirementCheck(f"{what} present or absent", True, f"{what} present")
    return RequirementCheck(f"{what} present or absent", False, f"other code at the {what} address")


async def _activity_checks(
    eth: EthClient,
    probe: EthClient,
    chain_id: int,
    head: dict[str, object],
    thresholds: RpcHealthThresholds | None,
) -> list[RequirementCheck]:
    limits = thresholds or RpcHealthThresholds()
    head_age_s = time.time() - int(str(head["timestamp"]), 16)
    try:
        pace = await block_time_s(eth, chain_id, head)
    except (RpcTransportError, RpcError):
        pace = FALLBACK_BLOCK_TIME_S
    fresh = head_freshness(int(str(head["number"]), 16), head_age_s, pace, limits)
    stable = stability(await probe_stability(probe, limits), limits)
    return [
        RequirementCheck("chain active (fresh head)", fresh.ok, fresh.detail),
        RequirementCheck("RPC endpoint stable", stable.ok, stable.detail),
    ]


async def _entry_point_check(
    eth: EthClient, release: EntryPointRelease, plan: ContractPlan
) -> RequirementCheck:
    what = f"EntryPoint v{release.version}"
    code = await eth.get_code(plan.address)
    if not plan.init_code:  # the release itself, which only its own deployment puts there
        ok = bool(code)
        detail = f"{what} present" if ok else f"no {what} at {plan.address}"
    elif code:
        ok = runtime_code_matches(plan.artifact, code)
        detail = f"{what} present" if ok else f"other code at the {what} address"
    else:
        ok = True
        detail = (
            f"{what} deployable through the deterministic deployer"
            if await eth.get_code(DETERMINISTIC_DEPLOYER)
            else f"{what} deployable once the deterministic deployer is installed"
        )
    return RequirementCheck(f"{what} present or deployable", ok, detail)


def entry_point_v06_plan() -> ContractPlan:
    """EntryPoint v0.6 at its canonical address, as a release the chain carries (never
    deployed by this planner: devnets place it, deploy/entry_point_v06.py)."""
    return ContractPlan("entryPointV06", V06.artifact("EntryPoint"), V06.address, b"", b"")


async def v09_entry_point_on(eth: EthClient) -> str:
    """Where EntryPoint v0.9 is served on this chain: its canonical address where the chain
    carries the release (public chains), else where its npm release candidate lands."""
    if await eth.get_code(V09.address):
        return V09.address
    assert V09.packaged_address is not None
    return V09.packaged_address


class ContractDeployer:
    def __init__(self, eth: EthClient, transactor: Transactor) -> None:
        self.eth = eth
        self.transactor = transactor

    async def ensure_deterministic_deployer(self) -> bool:
        """Install the deterministic deployer if the chain lacks it; True if it was installed."""
        if await self.eth.get_code(DETERMINISTIC_DEPLOYER):
            return False
        balance = await self.eth.get_balance(DETERMINISTIC_DEPLOYER_SIGNER)
        if balance < DETERMINISTIC_DEPLOYER_FUNDING_WEI:
            missing = DETERMINISTIC_DEPLOYER_FUNDING_WEI - balance
            await self.transactor.send(DETERMINISTIC_DEPLOYER_SIGNER, value=missing, gas=21_000)
        tx_hash = await self.eth.send_raw_transaction(DETERMINISTIC_DEPLOYER_TX)
        await self.eth.wait_for_receipt(tx_hash)
        if not await self.eth.get_code(DETERMINISTIC_DEPLOYER):
            raise DeploymentError("the deterministic deployer did not install")
        return True

    async def ensure(self, plan: ContractPlan) -> bool:
        """Deploy `plan` unless it is in place; True if it was deployed now."""
        code = await self.eth.get_code(plan.address)
        if not plan.init_code:  # a release the chain carries: its address proves its code
            if not code:
                raise DeploymentError(f"no {plan.name} at {plan.address}, and none to deploy")
            return False
        deployed_now = not code
        if deployed_now:
            await self.transactor.send(DETERMINISTIC_DEPLOYER, plan.deploy_data)
            code = await self.eth.get_code(plan.address)
            if not code:
                raise DeploymentError(f"{plan.name} did not land at {plan.address}")
        if not runtime_code_matches(plan.artifact, code):
            raise DeploymentError(
                f"the code at {plan.address} is not {plan.artifact}: refusing to use it"
            )
        return deployed_now

    async def deploy(
        self, plan: DeploymentPlan, funding: PaymasterFunding | None = None
    ) -> tuple[Deployment, list[str]]:
        """Everything in `plan`, then each paymaster's funding at its EntryPoint; returns what
        was done."""
        done: list[str] = []
        if await self.ensure_deterministic_deployer():
            done.append("installed the deterministic deployer")
        # v0.6's paymaster and factory only beside the EntryPoint v0.6 the chain carries: no
        # salt puts that release at its canonical address, so it is never ours to deploy.
        with_v06 = bool(await self.eth.get_code(V06.address))
        for contract in plan.contracts() + (plan.v06_contracts() if with_v06 else ()):
            if await self.ensure(contract):
                done.append(f"deployed {contract.name} at {contract.address}")
        if funding is not None:
            funded = [
                (plan.entry_point, plan.paymaster),
                (plan.entry_point_v07, plan.paymaster_v07),
                (plan.entry_point_v09, plan.paymaster_v09),
            ]
            if with_v06:
                funded.append((entry_point_v06_plan(), plan.paymaster_v06))
            for entry_point, paymaster in funded:
                done += await self.fund_paymaster(entry_point, paymaster, funding)
        return Deployment.of_plan(self.transactor.chain_id, plan, with_v06=with_v06), done

    async def fund_paymaster(
        self, entry_point: ContractPlan, paymaster: ContractPlan, funding: PaymasterFunding
    ) -> list[str]:
        """Top `paymaster`'s deposit and stake at `entry_point` up to `funding`. v0.7's
        getDepositInfo and the paymaster's deposit/addStake have v0.8's ABI."""
        ep = contracts.load(entry_point.artifact).abi
        pm = contracts.load(paymaster.artifact).abi
        raw = await self.eth.call(
            entry_point.address, ep.encode_call("getDepositInfo", paymaster.address)
        )
        deposit, _staked, stake, delay, _withdraw_time = ep.decode_output("getDepositInfo", raw)[0]
        done = []
        if deposit < funding.deposit_wei:
            top_up = funding.deposit_wei - deposit
            await self.transactor.send(paymaster.address, pm.encode_call("deposit"), value=top_up)
            done.append(f"deposited {top_up} wei for the {paymaster.name}")
        # The delay alone is nothing to stake: addStake without value reverts on an empty
        # stake ("no stake specified"), so an unstaked paymaster asked for none stays so.
        wanted = stake < funding.stake_wei or delay < funding.unstake_delay_s
        if wanted and max(stake, funding.stake_wei) > 0:
            add = max(funding.stake_wei - stake, 0)
            delay_s = max(delay, funding.unstake_delay_s)
            await self.transactor.send(
                paymaster.address, pm.encode_call("addStake", delay_s), value=add
            )
            done.append(f"staked {add} wei for the {paymaster.name} (unstake delay {delay_s}s)")
        return done
