"""The `entryway deploy` use case: bring a real network up to a full deployment."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from entryway.chain.retry import RetryPolicy
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.chain.transactor import Transactor
from entryway.deploy.deployer import (
    ContractDeployer,
    PaymasterFunding,
    check_requirements,
    v09_entry_point_on,
)
from entryway.deploy.plan import Operator, plan_deployment
from entryway.deploy.rpc_health import RpcHealthThresholds
from entryway.domain.evm import checksum
from entryway.errors import EntrywayError
from entryway.keys import load_key_file


class NetworkRequirementsError(EntrywayError):
    pass


async def deploy_network(
    *,
    rpc_url: str,
    key_file: Path,
    expected_chain_id: int | None,
    paymaster_signer: str | None,
    notary_submitter: str | None,
    deposit_wei: int,
    stake_wei: int,
    unstake_delay_s: int,
    emit: Callable[[object], None],
    rpc_health: RpcHealthThresholds | None = None,
) -> None:
    operator = load_key_file(key_file)
    operator_addresses = Operator(
        owner=operator.address,
        paymaster_signer=checksum(paymaster_signer or operator.address),
        notary_submitter=checksum(notary_submitter or operator.address),
    )
    # The probes go through a client that tries each call once: a retry would hide the
    # failure they count.
    once = RetryPolicy(attempts=1)
    async with JsonRpcClient(rpc_url) as rpc, JsonRpcClient(rpc_url, retry=once) as probe_rpc:
        eth = EthClient(rpc)
        chain_id = expected_chain_id if expected_chain_id is not None else await eth.chain_id()
        plan = plan_deployment(operator_addresses, entry_point_v09=await v09_entry_point_on(eth))
        checks = await check_requirements(
            eth, chain_id, plan, rpc_health, probe=EthClient(probe_rpc)
        )
        for check in checks:
            emit({"requirement": check.requirement, "ok": check.ok, "detail": check.detail})
        failed = [c.requirement for c in checks if not c.ok]
        if failed:
            raise NetworkRequirementsError(f"network requirements not met: {', '.join(failed)}")
        funding = None
        if deposit_wei or stake_wei:
            funding = PaymasterFunding(deposit_wei, stake_wei, unstake_delay_s)
        deployer = ContractDeployer(eth, Transactor(eth, operator, chain_id))
        deployment, done = await deployer.deploy(plan, funding)
        for step in done:
            emit({"done": step})
        emit(deployment.as_json(rpc_url))
