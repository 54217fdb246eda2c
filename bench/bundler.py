"""Bundler benchmark: validation throughput, inclusion rate, latency, gas per op.

Method (see docs/benchmarks.md): a devnet anvil with 1 s blocks; the standalone bundler
(`entryway bundler`, ERC-7562 tracing on, auto bundling) as its own process over HTTP, with
several executor keys; M SimpleAccounts (EntryPoint v0.8 release), deployed and funded in
a warm-up that is not measured; each sends K sequential ops (send, wait for the receipt,
send the next), all M at once. Then, separately: N ops from N fresh accounts sent at
concurrency C in manual mode (validation only, nothing bundled), against the ceiling the
same node gives for the same traced simulation called directly.

Run: `make bench-bundler` (or `python -m bench.bundler --accounts 50 --ops 4`).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from eth_account import Account

from entryway import contracts
from entryway.bundler.rpc_types import user_operation_json
from entryway.bundler.validation.simulation import Simulator
from entryway.bundler.validation.validation_calls import validation_calls
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.chain.transactor import Transactor
from entryway.deploy.deployer import ContractDeployer
from entryway.deploy.plan import ENTRYWAY_SALT, plan_contract
from entryway.devnet.anvil import free_port
from entryway.devnet.devnet import Devnet
from entryway.domain.evm import address_bytes
from entryway.domain.signatures import sign_digest
from entryway.domain.userop import UserOperation, user_op_hash

ETHER = 10**18
CHAIN_ID = 80002
RECEIPT_POLL_S = 0.1  # how often a waiting client asks for its receipt
FACTORY = contracts.load("SimpleAccountFactory")
ACCOUNT = contracts.load("SimpleAccount").abi
EP = contracts.load("EntryPoint").abi


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


class Bench:
    def __init__(self, eth: EthClient, rpc_url: str, entry_point: str, factory: str) -> None:
        self.eth = eth
        self.bundler = JsonRpcClient(rpc_url, timeout=60)
        self.entry_point = entry_point
        self.factory = factory

    async def op(self, owner: Any, sender: str, nonce: int, deploy: bool) -> UserOperation:
        block = await self.eth.get_block("latest")
        base_fee = int(block["baseFeePerGas"], 16)
        priority = 30 * 10**9  # Polygon's minimum is 25 gwei
        recipient = "0x000000000000000000000000000000000000bEEF"
        op = UserOperation(
            sender=sender,
            nonce=nonce,
            call_data=ACCOUNT.encode_call("execute", recipient, 1, b""),
            call_gas_limit=60_000,
            verification_gas_limit=400_000 if deploy else 100_000,
            pre_verification_gas=60_000,
            max_fee_per_gas=3 * base_fee + priority,
            max_priority_fee_per_gas=priority,
            factory=self.factory if deploy else None,
            factory_data=FACTORY.abi.encode_call("createAccount", owner.address, 0)
            if deploy
            else b"",
        )
        digest = user_op_hash(op, self.entry_point, CHAIN_ID)
        return op.with_signature(sign_digest(bytes(owner.key), digest))

    async def send(self, op: UserOperation) -> str:
        return str(
            await self.bundler.request(
                "eth_sendUserOperation", [user_operation_json(op), self.entry_point]
            )
        )

    async def receipt(self, op_hash: str, within_s: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            receipt = await self.bundler.request("eth_getUserOperationReceipt", [op_hash])
            if receipt is not None:
                return dict(receipt)
            await asyncio.sleep(RECEIPT_POLL_S)
        raise TimeoutError(op_hash)

    async def new_account(self) -> tuple[Any, str]:
        owner = Account.create()
        raw = await self.eth.call(
            self.factory, FACTORY.abi.encode_call("getAddress", owner.address, 0)
        )
        sender = FACTORY.abi.decode_output("getAddress", raw)[0]
        await self.eth.rpc.request("anvil_setBalance", [sender, hex(10 * ETHER)])
        return owner, sender


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        async with Devnet(Path(tmp), [CHAIN_ID], block_time_s=1.0) as devnet:
            chain = devnet.chains[0]
            async with JsonRpcClient(chain.rpc_url) as rpc:
                eth = EthClient(rpc)
                executor_file = Path(tmp) / "executors.key"
                keys = [Account.create() for _ in range(args.executors)]
                for key in keys:
                    await rpc.request("anvil_setBalance", [key.address, hex(1000 * ETHER)])
                executor_file.write_text("\n".join(k.key.hex() for k in keys))
                init = FACTORY.bytecode + bytes(12) + address_bytes(chain.deployment.entry_point)
                plan = plan_contract("simple", "SimpleAccountFactory", ENTRYWAY_SALT, init)
                await ContractDeployer(eth, Transactor(eth, devnet.keys.operator, CHAIN_ID)).ensure(
                    plan
                )
                port = free_port()
                proc = await asyncio.create_subprocess_exec(
                    str(Path(sys.executable).with_name("entryway")), "bundler",
                    "--rpc-url", chain.rpc_url, "--executor-key-file", str(executor_file),
                    "--port", str(port), "--auto-bundle-interval", "0.1", "--debug-rpc",
                )  # fmt: skip
                try:
                    bench = Bench(
                        eth,
                        f"http://127.0.0.1:{port}/rpc",
                        chain.deployment.entry_point,
                        plan.address,
                    )
                    for _ in range(100):
                        try:
                            await bench.bundler.request("eth_chainId")
                            break
                        except Exception:
                            await asyncio.sleep(0.1)
                    if not args.validate:  # --validate 0: the inclusion workload only
                        return await inclusion(bench, args)
                    return await measure(bench, eth, args)
                finally:
                    proc.terminate()
                    await proc.wait()
                    await bench.bundler.aclose()


async def measure(bench: Bench, eth: EthClient, args: argparse.Namespace) -> dict[str, Any]:
    return {**await inclusion(bench, args), **await validation_throughput(bench, eth, args)}


async def inclusion(bench: Bench, args: argparse.Namespace) -> dict[str, Any]:
    """The lockstep workload: `args.accounts` users each send `args.ops` sequential ops
    through `bench.bundler`, after an unmeasured warm-up that deploys every account."""
    # Warm-up (not measured): deploy every account with its first op.
    accounts = [await bench.new_account() for _ in range(args.accounts)]
    hashes = [await bench.send(await bench.op(o, s, 0, True)) for o, s in accounts]
    await asyncio.gather(*(bench.receipt(h) for h in hashes))

    latencies: list[float] = []
    accept: list[float] = []
    op_hashes: list[str] = []

    async def user(owner: Any, sender: str) -> None:
        for k in range(args.ops):
            op = await bench.op(owner, sender, k + 1, False)
            start = time.monotonic()
            op_hash = await bench.send(op)
            accept.append(time.monotonic() - start)
            receipt = await bench.receipt(op_hash)
            assert receipt["success"], receipt
            latencies.append(time.monotonic() - start)
            op_hashes.append(op_hash)

    start = time.monotonic()
    await asyncio.gather(*(user(o, s) for o, s in accounts))
    elapsed = time.monotonic() - start
    gas_per_op, bundles = await bundle_gas_per_op(bench, op_hashes)
    return {
        "ops": len(op_hashes),
        "included_ops_per_s": len(op_hashes) / elapsed,
        "p50_s": statistics.median(latencies),
        "p95_s": percentile(latencies, 95),
        "accept_p50_ms": statistics.median(accept) * 1000,
        "gas_per_op": gas_per_op,
        "ops_per_bundle": len(op_hashes) / bundles,
    }


async def bundle_gas_per_op(bench: Bench, op_hashes: list[str]) -> tuple[float, int]:
    """handleOps gas used per op over the bundles that carried `op_hashes`, and how many
    bundles there were."""
    txs: dict[str, int] = {}
    for h in op_hashes:
        receipt = await bench.receipt(h)
        tx = receipt["receipt"]
        txs[tx["transactionHash"]] = int(tx["gasUsed"], 16)
    return sum(txs.values()) / len(op_hashes), len(txs)


async def validation_throughput(
    bench: Bench, eth: EthClient, args: argparse.Namespace
) -> dict[str, Any]:
    await bench.bundler.request("debug_bundler_setBundlingMode", ["manual"])
    fresh = [await bench.new_account() for _ in range(args.validate)]
    accounts = []
    for owner, sender in fresh:  # deployed, so validation is the plain-op path
        await bench.send(await bench.op(owner, sender, 0, True))
        accounts.append((owner, sender))
    while await bench.bundler.request("debug_bundler_dumpMempool", [bench.entry_point]):
        await bench.bundler.request("debug_bundler_sendBundleNow")
    ops = [await bench.op(o, s, 1, False) for o, s in accounts]
    queue = list(ops)

    async def worker() -> None:
        while queue:
            await bench.send(queue.pop())

    start = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(args.concurrency)))
    accepted_per_s = len(ops) / (time.monotonic() - start)

    # Ceilings, straight to the node at the same concurrency, responses parsed: the traced
    # simulateValidation other bundlers run, and this bundler's own pair of node calls (the
    # untraced simulateValidation beside the traced replay of the entity calls).
    simulator = Simulator(eth, bench.entry_point)
    raw = await eth.call(bench.entry_point, EP.encode_call("senderCreator"))
    sender_creator = EP.decode_output("senderCreator", raw)[0]

    async def full_trace(op: UserOperation) -> None:
        await simulator.trace("simulateValidation", op.packed())

    async def replay_pair(op: UserOperation) -> None:
        op_hash = user_op_hash(op, bench.entry_point, CHAIN_ID)
        calls = validation_calls(op, op_hash, sender_creator)
        await asyncio.gather(
            simulator.call("simulateValidation", op.packed()),
            simulator.trace_replay(calls),
        )

    async def rate(call: Any) -> float:
        queue = list(ops)

        async def worker() -> None:
            while queue:
                await call(queue.pop())

        start = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(args.concurrency)))
        return len(ops) / (time.monotonic() - start)

    full_ceiling = await rate(full_trace)
    replay_ceiling = await rate(replay_pair)
    return {
        "accepted_ops_per_s": accepted_per_s,
        "traced_simulations_per_s": full_ceiling,
        "validation_vs_full_trace_ceiling": accepted_per_s / full_ceiling,
        "replayed_validations_per_s": replay_ceiling,
        "validation_vs_replay_ceiling": accepted_per_s / replay_ceiling,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accounts", type=int, default=50)
    parser.add_argument("--ops", type=int, default=4)
    parser.add_argument("--executors", type=int, default=4)
    parser.add_argument("--validate", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=4)
    result = asyncio.run(run(parser.parse_args()))
    for key, value in result.items():
        print(f"{key}: {value:.3f}" if isinstance(value, float) else f"{key}: {value}")


if __name__ == "__main__":
    main()
