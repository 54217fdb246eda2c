"""`entryway paymaster ...`: top up the deposit, show its state, manage the signer set.

Each command is a plain async function (tested directly) and a thin typer command; the CLI
registers `paymaster_app` as a sub-command group.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any

import typer

from entryway import contracts
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.chain.transactor import Transactor
from entryway.deploy.plan import ENTRY_POINT_ADDRESS
from entryway.domain.evm import checksum
from entryway.errors import EntrywayError
from entryway.keys import load_key_file
from entryway.paymaster.deposit import is_signer, read_deposit, set_signer, top_up

Emit = Callable[[object], None]
EP = contracts.load("EntryPoint").abi


async def deposit(
    *,
    rpc_url: str,
    key_file: Path,
    paymaster: str,
    amount_wei: int,
    entry_point: str = ENTRY_POINT_ADDRESS,
    emit: Emit,
) -> int:
    """Add `amount_wei` from the key's account to the paymaster's deposit; the new deposit."""
    if amount_wei <= 0:
        raise EntrywayError("the amount to deposit must be a positive number of wei")
    funder = load_key_file(key_file)
    async with JsonRpcClient(rpc_url) as rpc:
        eth = EthClient(rpc)
        transactor = Transactor(eth, funder, await eth.chain_id())
        receipt = await top_up(transactor, entry_point, paymaster, amount_wei)
        now = await read_deposit(eth, entry_point, paymaster)
    emit(
        {
            "paymaster": checksum(paymaster),
            "depositedWei": amount_wei,
            "depositWei": now,
            "transactionHash": receipt.tx_hash,
        }
    )
    return now


async def status(
    *,
    rpc_url: str,
    paymaster: str,
    signers: list[str],
    entry_point: str = ENTRY_POINT_ADDRESS,
    emit: Emit,
) -> dict[str, Any]:
    """The paymaster's deposit and stake, and whether each of `signers` may sign."""
    async with JsonRpcClient(rpc_url) as rpc:
        eth = EthClient(rpc)
        raw = await eth.call(entry_point, EP.encode_call("getDepositInfo", checksum(paymaster)))
        info = EP.decode_output("getDepositInfo", raw)[0]
        out = {
            "chainId": await eth.chain_id(),
            "paymaster": checksum(paymaster),
            "depositWei": info[0],
            "staked": info[1],
            "stakeWei": info[2],
            "unstakeDelaySec": info[3],
            "withdrawTime": info[4],
            "signers": {checksum(s): await is_signer(eth, paymaster, s) for s in signers},
        }
    emit(out)
    return out


async def change_signer(
    *, rpc_url: str, owner_key_file: Path, paymaster: str, signer: str, allowed: bool, emit: Emit
) -> None:
    """Add or remove one address in the paymaster's signer set (the owner's transaction)."""
    owner = load_key_file(owner_key_file)
    async with JsonRpcClient(rpc_url) as rpc:
        eth = EthClient(rpc)
        transactor = Transactor(eth, owner, await eth.chain_id())
        receipt = await set_signer(transactor, paymaster, signer, allowed)
        now = await is_signer(eth, paymaster, signer)
    emit(
        {
            "paymaster": checksum(paymaster),
            "signer": checksum(signer),
            "allowed": now,
            "transactionHash": receipt.tx_hash,
        }
    )


# ---------------------------------------------------------------------- typer

paymaster_app = typer.Typer(
    name="paymaster",
    help="The paymaster's EntryPoint deposit and signer set.",
    no_args_is_help=True,
    add_completion=False,
)

RpcUrl = Annotated[str, typer.Option(help="The chain's JSON-RPC endpoint.")]
Paymaster = Annotated[str, typer.Option(help="The VerifyingPaymaster's address.")]
EntryPoint = Annotated[str, typer.Option(help="EntryPoint v0.8 address.")]


def _emit(obj: object) -> None:
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def _run(work: Coroutine[Any, Any, object]) -> None:
    try:
        asyncio.run(work)
    except EntrywayError as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from None


@paymaster_app.command("deposit")
def deposit_command(
    rpc_url: RpcUrl,
    key_file: Annotated[Path, typer.Option(help="File holding the funding account's key.")],
    paymaster: Paymaster,
    amount_wei: Annotated[int, typer.Option(help="Wei to add to the deposit.")],
    entry_point: EntryPoint = ENTRY_POINT_ADDRESS,
) -> None:
    """Top up the paymaster's deposit at the EntryPoint (which pays for sponsored ops)."""
    _run(
        deposit(
            rpc_url=rpc_url,
            key_file=key_file,
            paymaster=paymaster,
            amount_wei=amount_wei,
            entry_point=entry_point,
            emit=_emit,
        )
    )


@paymaster_app.command("status")
def status_command(
    rpc_url: RpcUrl,
    paymaster: Paymaster,
    signer: Annotated[
        list[str] | None, typer.Option(help="Address(es) to check in the signer set.")
    ] = None,
    entry_point: EntryPoint = ENTRY_POINT_ADDRESS,
) -> None:
    """The paymaster's deposit, stake and signers."""
    _run(
        status(
            rpc_url=rpc_url,
            paymaster=paymaster,
            signers=signer or [],
            entry_point=entry_point,
            emit=_emit,
        )
    )


@paymaster_app.command("set-signer")
def set_signer_command(
    rpc_url: RpcUrl,
    owner_key_file: Annotated[Path, typer.Option(help="File holding the paymaster owner's key.")],
    paymaster: Paymaster,
    signer: Annotated[str, typer.Option(help="The signer address to add or remove.")],
    allow: Annotated[bool, typer.Option("--allow/--revoke", help="Add or remove it.")] = True,
) -> None:
    """Add a signer to the paymaster's set, or remove one (a key rotation's two steps)."""
    _run(
        change_signer(
            rpc_url=rpc_url,
            owner_key_file=owner_key_file,
            paymaster=paymaster,
            signer=signer,
            allowed=allow,
            emit=_emit,
        )
    )
