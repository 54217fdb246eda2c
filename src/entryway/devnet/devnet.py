"""A set of local chains, one anvil per chain id, each with every contract deployed.

State lives in `<data-dir>/devnet/`: each chain's anvil state file and node record, and the
operator keys the contracts were deployed with (so addresses stay the same across restarts).
The nodes die with the process that runs the devnet, and one that exits is started again
(`ownership`, `supervision`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from eth_account.signers.local import LocalAccount

from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.chain.transactor import Transactor
from entryway.deploy.deployer import (
    ContractDeployer,
    Deployment,
    PaymasterFunding,
    v09_entry_point_on,
)
from entryway.deploy.entry_point_v06 import place_entry_point_v06
from entryway.deploy.plan import Operator, plan_deployment
from entryway.devnet.anvil import AnvilConfig, AnvilProcess, free_port
from entryway.devnet.fee_layer import FeeLayer
from entryway.devnet.fees import DevnetFees, devnet_fees
from entryway.devnet.ownership import ensure_port_free, reap_leftover
from entryway.devnet.predeploys import place_gas_price_oracle
from entryway.devnet.supervision import supervise
from entryway.keys import load_or_create_key
from entryway.storage.private_files import private_directory

ETHER = 10**18
# What the devnet gives its accounts: ample for any test, far below anvil's overflow limits.
_OPERATOR_BALANCE = 1_000_000 * ETHER
_SUBMITTER_BALANCE = 10_000 * ETHER
DEVNET_PAYMASTER_FUNDING = PaymasterFunding(
    deposit_wei=10_000 * ETHER, stake_wei=10 * ETHER, unstake_delay_s=86_400
)


DEVNET_EXECUTORS = 4  # executor keys per devnet chain


def more_executor_key_files(key_dir: Path) -> list[Path]:
    """The devnet's executor key files past the first (`bundler-executor.key`)."""
    return [key_dir / f"bundler-executor-{n}.key" for n in range(2, DEVNET_EXECUTORS + 1)]


@dataclass(frozen=True, slots=True)
class DevnetKeys:
    operator: LocalAccount
    paymaster_signer: LocalAccount
    notary_submitter: LocalAccount
    bundler_executor: LocalAccount
    # More executor keys: several bundles fill one block when one cannot carry the ops.
    more_executors: tuple[LocalAccount, ...] = ()

    @property
    def executors(self) -> tuple[LocalAccount, ...]:
        return (self.bundler_executor, *self.more_executors)

    @classmethod
    def load_or_create(cls, key_dir: Path) -> DevnetKeys:
        return cls(
            operator=load_or_create_key(key_dir / "operator.key"),
            paymaster_signer=load_or_create_key(key_dir / "paymaster-signer.key"),
            notary_submitter=load_or_create_key(key_dir / "notary-submitter.key"),
            bundler_executor=load_or_create_key(key_dir / "bundler-executor.key"),
            more_executors=tuple(
                load_or_create_key(path) for path in more_executor_key_files(key_dir)
            ),
        )

    @property
    def operator_addresses(self) -> Operator:
        return Operator(
            owner=self.operator.address,
            paymaster_signer=self.paymaster_signer.address,
            notary_submitter=self.notary_submitter.address,
        )


@dataclass(frozen=True, slots=True)
class DevnetChain:
    chain_id: int
    rpc_url: str
    deployment: Deployment
    provisioned: tuple[str, ...]  # what this start had to do; empty when all was in place

    def as_json(self) -> dict[str, object]:
        return self.deployment.as_json(self.rpc_url)


class Devnet:
    def __init__(
        self,
        data_dir: Path,
        chain_ids: Sequence[int],
        *,
        base_port: int = 0,
        block_time_s: float | None = None,
    ) -> None:
        if len(set(chain_ids)) != len(chain_ids) or not chain_ids:
            raise ValueError("give one or more distinct chain ids")
        self.dir = data_dir / "devnet"
        self.chain_ids = tuple(chain_ids)
        self.base_port = base_port
        self.block_time_s = block_time_s
        private_directory(self.dir)  # 0700, and its keys directory: operator keys live here
        self.keys = DevnetKeys.load_or_create(private_directory(self.dir / "keys"))
        self.chains: list[DevnetChain] = []
        self._nodes: list[AnvilProcess] = []
        self._layers: list[FeeLayer] = []
        self._supervisors: list[asyncio.Task[None]] = []

    async def start(self) -> list[DevnetChain]:
        ports = await claim_ports(self.dir.parent, self.chain_ids, self.base_port)
        try:
            for chain_id, port in zip(self.chain_ids, ports, strict=True):
                self.chains.append(await self._start_chain(chain_id, port))
        except BaseException:
            await self.stop()
            raise
        return self.chains

    async def _start_chain(self, chain_id: int, port: int) -> DevnetChain:
        """Anvil, and for a chain a network has, the fee layer in front of it on `port`:
        clients and Entryway alike reach the node through the layer."""
        fees = devnet_fees(chain_id)
        node = AnvilProcess(
            AnvilConfig(
                chain_id=chain_id,
                port=0 if fees is not None else port,
                state_path=self.dir / f"anvil-{chain_id}.json",
                log_path=self.dir / f"anvil-{chain_id}.log",
                record_path=self._record_path(chain_id),
                base_fee_per_gas=fees.base_fee_floor if fees is not None else None,
                min_suggested_tip=fees is None,
                block_time_s=None if _whole_seconds(self.block_time_s) else self.block_time_s,
            )
        )
        await node.start()
        self._nodes.append(node)
        rpc_url = node.rpc_url
        await _place_predeploys(node, fees)
        if fees is not None:
            layer = FeeLayer(
                node.rpc_url,
                fees,
                node.config.host,
                port or free_port(node.config.host),
                block_time_s=self.block_time_s,
            )
            await asyncio.to_thread(layer.start)
            self._layers.append(layer)
            rpc_url = layer.url
        chain = await self._provision(chain_id, rpc_url)
        await self._set_block_pace(node)

        async def after_restart() -> None:
            # The saved state may predate the deployment (it is written every few seconds).
            await _place_predeploys(node, fees)
            await self._provision(chain_id, rpc_url)
            await self._set_block_pace(node)

        self._supervisors.append(asyncio.create_task(supervise(node, after_restart)))
        return chain

    def node_url(self, chain_id: int) -> str:
        """The URL of the chain's anvil itself, behind its fee layer where it has one: for a
        client that needs none of the layer's fee answers (a benchmark's bundler, whose
        node calls should cost nothing in the process that runs the devnet)."""
        return self._nodes[self.chain_ids.index(chain_id)].rpc_url

    def _record_path(self, chain_id: int) -> Path:
        return _record_path(self.dir, chain_id)

    async def _set_block_pace(self, node: AnvilProcess) -> None:
        if _whole_seconds(self.block_time_s):
            # Deployed at once, block by block; from here on, blocks at the chain's pace
            # (anvil switches only to whole seconds; a fraction applies from the start).
            async with JsonRpcClient(node.rpc_url) as rpc:
                await rpc.request("evm_setIntervalMining", [int(self.block_time_s or 0)])

    async def _provision(self, chain_id: int, rpc_url: str) -> DevnetChain:
        async with JsonRpcClient(rpc_url) as rpc:
            eth = EthClient(rpc)
            for account, balance in (
                (self.keys.operator, _OPERATOR_BALANCE),
                (self.keys.notary_submitter, _SUBMITTER_BALANCE),
                *((key, _SUBMITTER_BALANCE) for key in self.keys.executors),
            ):
                if await eth.get_balance(account.address) < balance // 2:
                    await rpc.request("anvil_setBalance", [account.address, hex(balance)])
            deployer = ContractDeployer(eth, Transactor(eth, self.keys.operator, chain_id))
            plan = plan_deployment(
                self.keys.operator_addresses, entry_point_v09=await v09_entry_point_on(eth)
            )
            # EntryPoint v0.6 first: the deployment binds v0.6's paymaster and factory to it.
            done = ["installed the deterministic deployer"] * (
                await deployer.ensure_deterministic_deployer()
            )
            done += await place_entry_point_v06(rpc, deployer)
            deployment, deployed = await deployer.deploy(plan, DEVNET_PAYMASTER_FUNDING)
            done += deployed
        return DevnetChain(chain_id, rpc_url, deployment, tuple(done))

    async def stop(self) -> None:
        supervisors, self._supervisors = self._supervisors, []
        for supervisor in supervisors:
            supervisor.cancel()
        await asyncio.gather(*supervisors, return_exceptions=True)
        layers, self._layers = self._layers, []
        for layer in reversed(layers):
            await asyncio.to_thread(layer.stop)
        nodes, self._nodes = self._nodes, []
        for node in reversed(nodes):
            await node.stop()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def claim_ports(data_dir: Path, chain_ids: Sequence[int], base_port: int) -> list[int]:
    """The devnet's RPC ports (0: any), once nodes an earlier start left running in
    `data_dir` are stopped; `DevnetPortTakenError` when anything else holds one of them."""
    devnet_dir = data_dir / "devnet"
    for chain_id in chain_ids:
        what = f"the devnet node for chain {chain_id}"
        await reap_leftover(_record_path(devnet_dir, chain_id), what)
    ports = [base_port + i if base_port else 0 for i in range(len(chain_ids))]
    for chain_id, port in zip(chain_ids, ports, strict=True):
        if port:
            ensure_port_free("127.0.0.1", port, f"the devnet RPC of chain {chain_id}")
    return ports


def _record_path(devnet_dir: Path, chain_id: int) -> Path:
    return devnet_dir / f"anvil-{chain_id}.pid"


async def _place_predeploys(node: AnvilProcess, fees: DevnetFees | None) -> None:
    if fees is not None and fees.l1_oracle is not None and fees.l1_prices is not None:
        async with JsonRpcClient(node.rpc_url) as rpc:
            await place_gas_price_oracle(rpc, fees.l1_oracle, fees.l1_prices)


def _whole_seconds(block_time_s: float | None) -> bool:
    return block_time_s is not None and block_time_s >= 1 and block_time_s == int(block_time_s)
