"""`entryway devnet`, `deploy`, `addresses` and `networks`: the commands that bring up, place
and describe the contracts on a chain."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from entryway.cli.support import DataDir, emit, parse_chains, run, until_signalled
from entryway.domain.networks import DEFAULT_DEVNET_CHAINS, NETWORKS


def devnet(
    chains: Annotated[str, typer.Option(help="Chain ids to run, comma-separated.")] = ",".join(
        map(str, DEFAULT_DEVNET_CHAINS)
    ),
    data_dir: DataDir = Path(".entryway"),
    base_port: Annotated[
        int, typer.Option(help="Port of the first chain's RPC (the next ones follow); 0: any.")
    ] = 8545,
    block_time: Annotated[
        float | None, typer.Option(help="Seconds between blocks; default: mine each tx at once.")
    ] = None,
) -> None:
    """Run local anvil devnets with EntryPoint v0.8 and v0.7 and Entryway's contracts deployed.

    Prints one JSON line per chain; Ctrl-C stops them, their state kept in the data dir.
    """
    run(_run_devnet(data_dir, parse_chains(chains), base_port, block_time))


async def _run_devnet(
    data_dir: Path, chains: list[int], base_port: int, block_time: float | None
) -> None:
    from entryway.devnet.devnet import Devnet

    async with Devnet(data_dir, chains, base_port=base_port, block_time_s=block_time) as devnet:
        for chain in devnet.chains:
            emit(chain.as_json())
        await until_signalled()


def deploy(
    rpc_url: Annotated[str, typer.Option(help="The chain's JSON-RPC endpoint.")],
    key_file: Annotated[Path, typer.Option(help="File holding the operator's private key.")],
    chain_id: Annotated[
        int | None, typer.Option(help="The chain id the RPC must answer with.")
    ] = None,
    paymaster_signer: Annotated[
        str | None, typer.Option(help="Address that signs sponsorships; default: the operator.")
    ] = None,
    notary_submitter: Annotated[
        str | None, typer.Option(help="Address allowed to anchor; default: the operator.")
    ] = None,
    paymaster_deposit_wei: Annotated[
        int, typer.Option(help="Top each paymaster's deposit up to this.")
    ] = 0,
    paymaster_stake_wei: Annotated[
        int, typer.Option(help="Top each paymaster's stake up to this.")
    ] = 0,
    unstake_delay: Annotated[int, typer.Option(help="Paymaster unstake delay, seconds.")] = 86_400,
    rpc_probes: Annotated[
        int, typer.Option(help="eth_blockNumber probes of the RPC's stability.")
    ] = 5,
    rpc_probe_interval: Annotated[
        float, typer.Option(help="Seconds between two stability probes.")
    ] = 0.5,
    rpc_max_failures: Annotated[
        int, typer.Option(help="Probes that may fail with the RPC still stable.")
    ] = 0,
    rpc_max_latency_ms: Annotated[
        int, typer.Option(help="The slowest probe answer allowed, milliseconds.")
    ] = 2_000,
    max_head_age_blocks: Annotated[
        int, typer.Option(help="How many block times old the latest block may be.")
    ] = 30,
) -> None:
    """Check a network against the requirements, then deploy everything missing (idempotent):
    EntryPoint v0.8 and v0.7, each with Entryway's paymaster, and the contracts beside them."""
    from entryway.deploy.commands import deploy_network
    from entryway.deploy.rpc_health import RpcHealthThresholds

    try:
        rpc_health = RpcHealthThresholds(
            probes=rpc_probes,
            probe_interval_s=rpc_probe_interval,
            max_failures=rpc_max_failures,
            max_latency_ms=rpc_max_latency_ms,
            max_head_age_blocks=max_head_age_blocks,
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None

    run(
        deploy_network(
            rpc_url=rpc_url,
            key_file=key_file,
            expected_chain_id=chain_id,
            paymaster_signer=paymaster_signer,
            notary_submitter=notary_submitter,
            deposit_wei=paymaster_deposit_wei,
            stake_wei=paymaster_stake_wei,
            unstake_delay_s=unstake_delay,
            emit=emit,
            rpc_health=rpc_health,
        )
    )


def addresses(
    owner: Annotated[str, typer.Option(help="The operator (owner) address.")],
    paymaster_signer: Annotated[str | None, typer.Option()] = None,
    notary_submitter: Annotated[str | None, typer.Option()] = None,
) -> None:
    """Compute, offline, where `deploy` puts every contract (the same on every chain; on one
    that carries the EntryPoint v0.9 release, v0.9's paymaster and factory bind to it, and
    `deploy` prints their addresses; v0.6's paymaster and factory are deployed only on a
    chain that carries EntryPoint v0.6)."""
    from entryway.deploy.plan import Operator, plan_deployment
    from entryway.domain.evm import checksum

    plan = plan_deployment(
        Operator(
            owner=checksum(owner),
            paymaster_signer=checksum(paymaster_signer or owner),
            notary_submitter=checksum(notary_submitter or owner),
        )
    )
    emit({c.name: c.address for c in plan.contracts() + plan.v06_contracts()})


def networks() -> None:
    """List the supported networks."""
    for n in NETWORKS.values():
        emit(
            {
                "chainId": n.chain_id,
                "name": n.name,
                "family": n.family.value,
                "environment": n.environment.value,
                "nativeToken": n.native_token.symbol,
                "explorer": n.explorer_url,
                "l2": n.is_l2,
                "publicRpcs": [
                    {"url": r.url, "operator": r.operator, "limits": r.limits}
                    for r in n.public_rpcs
                ],
            }
        )
