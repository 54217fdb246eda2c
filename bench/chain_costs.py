"""What an operation costs on each chain: gas, fees, L1 fee, credits and euros.

Method: `entryway up --chains 137,80002,8453,84532` runs as its own process (its devnets as
they stand in for Polygon, Amoy, Base and Base Sepolia, SQLite, a bundler per chain, the
paymaster, the worker). One STARTER project on the four chains, credits bought through the
operator routes, no sponsorship policy (every op sponsored). On each chain, with the SDK as
an app uses it: a deploying op (a new account's first op, `execute(0x…bEEF, 0, 0x)` with
initCode), a plain sponsored op (the same call from the deployed account), a notarization
(`notarize_hash`, direct mode, until its anchor is mined), and a guardian recovery
(`add_guardian`, then `start_recovery` with the guardian's approval, then, after moving
the devnet's clock past the recovery delay, `finalize_recovery`; the guardian change
itself is not in the table). For each: gas used (the op's actualGasUsed; the anchor
transaction's gasUsed), the base fee of its block and the tip over it that the transaction
paid, the L1 data fee on Base (the GasPriceOracle's `getL1Fee` of the transaction's data
in its block; "-" where the devnet has no oracle), the chain cost (an op's actualGasCost;
the anchor's gas x price + L1 fee) and its euros at the configured token price, and the
credits charged (an op's settled credits from `/op-status`; the notarization request's
credits), which are euros at 1 EUR per million credits. The operator pays the anchor's
chain cost; a notarization's credits do not depend on it.

Run: `python -m bench.chain_costs` (add `--write-doc` to refresh docs/pricing.md).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import signal
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from entryway_sdk import Entryway, PendingUserOperation
from eth_abi.abi import encode
from eth_account import Account

from bench.chain_cost_report import (
    DOC,
    MeasuredCost,
    comparison_table,
    cost_table,
    price_text,
    sources,
    write_block,
)
from bench.sponsor_service import ENTRYWAY, RunningService
from entryway.devnet.anvil import free_port
from entryway.domain.networks import OP_STACK_GAS_PRICE_ORACLE
from entryway.domain.pricebook import default_price_book

CHAINS = (137, 80002, 8453, 84532)
CREDITS = 10**10
CALL = {"to": "0x000000000000000000000000000000000000bEEF", "value": 0}
GET_L1_FEE = "0x49948e0e"  # getL1Fee(bytes)
RECOVERY_WAIT_S = 3 * 24 * 3600  # past any default recovery delay


class ChainNode:
    """The devnet's own JSON-RPC, for receipts, blocks and the clock."""

    def __init__(self, http: httpx.AsyncClient, url: str) -> None:
        self.http, self.url = http, url

    async def call(self, method: str, *params: Any) -> Any:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": list(params)}
        answer = (await self.http.post(self.url, json=body)).json()
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer["result"]

    async def l1_fee(self, tx: dict[str, Any], block: str) -> int | None:
        """What the chain's GasPriceOracle charges for posting `tx`'s data to L1, or None
        when the chain has no oracle. A receipt's own `l1Fee` (OP-stack nodes) comes first."""
        code = await self.call("eth_getCode", OP_STACK_GAS_PRICE_ORACLE, block)
        if code in ("0x", "0x0", None):
            return None
        data = GET_L1_FEE + encode(["bytes"], [bytes.fromhex(tx["input"][2:])]).hex()
        raw = await self.call("eth_call", {"to": OP_STACK_GAS_PRICE_ORACLE, "data": data}, block)
        return int(raw, 16)

    async def transaction_cost(self, tx_hash: str) -> dict[str, int | None]:
        receipt = await self.call("eth_getTransactionReceipt", tx_hash)
        tx = await self.call("eth_getTransactionByHash", tx_hash)
        block = await self.call("eth_getBlockByNumber", receipt["blockNumber"], False)
        l1 = receipt.get("l1Fee")
        l1_fee = int(l1, 16) if l1 is not None else await self.l1_fee(tx, receipt["blockNumber"])
        return {
            "gas_used": int(receipt["gasUsed"], 16),
            "gas_price": int(receipt["effectiveGasPrice"], 16),
            "base_fee": int(block.get("baseFeePerGas") or "0x0", 16),
            "l1_fee": l1_fee,
        }


async def settled_credits(client: Entryway, user_op_hash: str, within_s: float = 60) -> int:
    deadline = time.monotonic() + within_s
    while True:
        raw = await client.api.get(
            "/op-status", {"chainId": client.chain_id, "userOpHash": user_op_hash}
        )
        if raw.get("creditsFinal"):
            return int(raw["credits"])
        if time.monotonic() > deadline:
            raise TimeoutError(f"the credits of {user_op_hash} were not settled in {within_s} s")
        await asyncio.sleep(0.2)


async def op_cost(
    client: Entryway, node: ChainNode, operation: str, sent: Awaitable[PendingUserOperation]
) -> MeasuredCost:
    op = await sent
    receipt = await op.wait(timeout=120)
    if not receipt.success:
        raise RuntimeError(f"{operation} reverted: {receipt.reason}")
    tx = await node.transaction_cost(receipt.transaction_hash)
    return MeasuredCost(
        chain_id=client.chain_id,
        operation=operation,
        gas_used=receipt.actual_gas_used,
        base_fee_wei=int(tx["base_fee"] or 0),
        gas_price_wei=int(tx["gas_price"] or 0),
        l1_fee_wei=tx["l1_fee"],
        gas_cost_wei=receipt.actual_gas_cost,
        credits=await settled_credits(client, op.user_op_hash),
    )


async def notarization_cost(client: Entryway, node: ChainNode) -> MeasuredCost:
    notarization = await client.notarize_hash(secrets.token_bytes(32), mode="direct")
    await notarization.wait_for_proof(timeout=120)
    anchor = (await notarization.status()).anchor
    assert anchor is not None
    tx = await node.transaction_cost(anchor.transaction_hash)
    gas_used, price = int(tx["gas_used"] or 0), int(tx["gas_price"] or 0)
    return MeasuredCost(
        chain_id=client.chain_id,
        operation="notarization (anchor)",
        gas_used=gas_used,
        base_fee_wei=int(tx["base_fee"] or 0),
        gas_price_wei=price,
        l1_fee_wei=tx["l1_fee"],
        gas_cost_wei=gas_used * price + (tx["l1_fee"] or 0),
        credits=notarization.credits,
    )


async def chain_costs(client: Entryway, node: ChainNode) -> list[MeasuredCost]:
    rows: list[MeasuredCost] = []

    async def measure(operation: str, run: Callable[[], Awaitable[MeasuredCost]]) -> None:
        try:
            rows.append(await run())
        except Exception as exc:  # reported in the table; the other rows still count
            error = f"{type(exc).__name__}: {exc}"[:160].replace("|", "/").replace("\n", " ")
            rows.append(MeasuredCost(client.chain_id, operation, 0, 0, 0, None, 0, None, error))
        print(client.chain_id, rows[-1], flush=True)

    wallet = await client.wallet(Account.create())
    await measure("deploying op", lambda: op_cost(client, node, "deploying op", wallet.send(CALL)))
    await measure("sponsored op", lambda: op_cost(client, node, "sponsored op", wallet.send(CALL)))
    await measure("notarization (anchor)", lambda: notarization_cost(client, node))

    guardian, new_owner = Account.create(), Account.create()
    await (await wallet.add_guardian(guardian.address)).wait(timeout=120)

    async def start() -> MeasuredCost:
        approval = await wallet.recovery_approval(guardian, new_owner.address)
        sent = wallet.start_recovery(new_owner.address, [approval])
        return await op_cost(client, node, "recovery: start", sent)

    async def finalize() -> MeasuredCost:
        await node.call("evm_increaseTime", RECOVERY_WAIT_S)
        await node.call("evm_mine")
        return await op_cost(client, node, "recovery: finalize", wallet.finalize_recovery())

    await measure("recovery: start", start)
    await measure("recovery: finalize", finalize)
    return rows


@contextlib.asynccontextmanager
async def entryway_up(data_dir: Path) -> AsyncIterator[RunningService]:
    """`entryway up` on the four chains, free ports, rate limits out of the way; stopped with
    SIGINT as Ctrl-C would."""
    port = free_port()
    log_path = data_dir / "entryway-up.log"
    env = {
        **os.environ,
        "ENTRYWAY_RATE_LIMITS": "FREE=1000000/second",
        "ENTRYWAY_HEAVY_RATE_LIMITS": "FREE=1000000/second",
    }
    with log_path.open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            ENTRYWAY, "up", "--data-dir", str(data_dir), "--port", str(port), "--base-port", "0",
            "--chains", ",".join(map(str, CHAINS)), stdout=log, stderr=log, env=env,
        )  # fmt: skip
    service = RunningService(proc, f"http://127.0.0.1:{port}", data_dir, log_path)
    try:
        async with httpx.AsyncClient() as http:
            for _ in range(1800):
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get(f"{service.base_url}/healthz")).status_code == 200:
                        break
                if proc.returncode is not None:
                    raise RuntimeError(f"entryway up exited; see {log_path}")
                await asyncio.sleep(0.1)
            else:
                raise RuntimeError("entryway up did not become healthy within 180 s")
        yield service
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGINT)
            try:
                await asyncio.wait_for(proc.wait(), 60)
            except TimeoutError:
                proc.kill()
                await proc.wait()


async def tenant(service: RunningService) -> str:
    """A STARTER project on the four chains with credits bought; its API key."""
    token = (service.data_dir / "admin-token").read_text().strip()
    admin = {"Authorization": f"Bearer {token}"}
    body = {
        "email": f"costs-{secrets.token_hex(4)}@example.org",
        "name": "chain costs",
        "plan": "STARTER",
        "chains": list(CHAINS),
    }
    async with httpx.AsyncClient(base_url=service.base_url, timeout=30) as http:
        created = (await http.post("/v1/admin/projects", json=body, headers=admin)).json()
        purchase = {"purchaseId": f"costs-{secrets.token_hex(4)}", "credits": CREDITS}
        url = f"/v1/admin/projects/{created['projectId']}/purchases"
        (await http.post(url, json=purchase, headers=admin)).raise_for_status()
    return str(created["apiKey"])


async def measure_all(service: RunningService, chains: list[int]) -> list[MeasuredCost]:
    rows: list[MeasuredCost] = []
    api_key = await tenant(service)
    async with httpx.AsyncClient(timeout=60) as http:
        for chain_id in chains:
            client = await Entryway.init(
                api_key=api_key,
                rpc_url=service.rpc_url(chain_id),
                chain_id=chain_id,
                base_url=service.base_url,
                http=http,
            )
            rows += await chain_costs(client, ChainNode(http, service.rpc_url(chain_id)))
    return rows


async def main(chains: list[int], running: tuple[str, Path] | None) -> list[MeasuredCost]:
    if running is not None:  # an `entryway up` already serving these chains
        url, data_dir = running
        log = data_dir / "entryway-up.log"
        service = RunningService(None, url, data_dir, log)  # type: ignore[arg-type]
        return await measure_all(service, chains)
    with tempfile.TemporaryDirectory(prefix="chain-costs-") as tmp:
        async with entryway_up(Path(tmp)) as service:
            rows = await measure_all(service, chains)
            for line in service.log_problems()[:20]:
                print("  service:", line[:300])
    return rows


def measured_at() -> str:
    """The commit measured, flagged when code differs from it (the doc itself aside)."""
    root = DOC.parents[1]

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], capture_output=True, text=True, cwd=root, check=False)
        return done.stdout.strip()

    sha = git("rev-parse", "--short", "HEAD")
    doc = DOC.relative_to(root).as_posix()
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", f":!{doc}")
    changes = " (with local changes)" if dirty else ""
    when = datetime.now(UTC).date().isoformat()
    return f"Measured at {sha or 'an unknown commit'}{changes} on {when}"


def report(rows: list[MeasuredCost]) -> list[str]:
    prices = dict(default_price_book().native_token_micro_eur)
    price_line = ", ".join(
        f"{chain}: {price_text(prices[chain])} EUR" for chain in CHAINS if chain in prices
    )
    return [
        f"{measured_at()} (`make bench-costs`); token prices as configured ({price_line}).",
        "",
        *cost_table(rows, prices),
        "",
        "Price per gas the devnet's transactions paid (median of the rows above) against "
        "the real chain's:",
        "",
        *comparison_table(rows),
        "",
        "Sources of the typical fees:",
        "",
        *sources(),
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--chains", default=",".join(map(str, CHAINS)))
    parser.add_argument("--write-doc", action="store_true")
    parser.add_argument("--url", help="measure a running `entryway up` at this URL instead")
    parser.add_argument("--data-dir", type=Path, help="that `entryway up`'s data dir")
    arguments = parser.parse_args()
    running = (arguments.url, arguments.data_dir) if arguments.url else None
    chain_ids = [int(c) for c in arguments.chains.split(",")]
    measured = asyncio.run(main(chain_ids, running))
    table = report(measured)
    print("\n".join(table))
    if arguments.write_doc:
        DOC.write_text(write_block(DOC.read_text(), "chain-costs", table))
