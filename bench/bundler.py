"""Bundler benchmark: validation throughput, inclusion rate, latency, gas per op.

Method (see docs/benchmarks.md): a devnet anvil with 1 s blocks; the standalone bundler
(`entryway bundler`, ERC-7562 tracing on, auto bundling) as its own process over HTTP, with
several executor keys; M SimpleAccounts (EntryPoint v0.8 release), deployed and funded in
a warm-up that is not measured; each sends K sequential ops (send, wait for the receipt,
send the next), all M at once. (bench/bundler_versions.py runs the same workload with the
accounts split across EntryPoint releases.) Then, separately: N ops from N fresh accounts sent at
concurrency C in manual mode (validation only, nothing bundled), against the ceiling the
same node gives for the same traced simulation called directly.

The node's kind is an axis (`--validation-mode`): the bundler is pinned to a validation
mode, on anvil itself wherever anvil serves it (`opcodes`, `calls`, `untraced`), so that a
round measures the mode and nothing else; a relay answering as hosted nodes do would add its
own hop and parsing to every node call and measure that with it. `native` alone goes
through a relay (bench/node_kind.py, the `geth` kind, its own process), since anvil has no
erc7562Tracer: its figures are those of the JavaScript tracer that plays it on anvil.

Run: `make bench-bundler` (or `python -m bench.bundler --accounts 50 --ops 4`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eth_account import Account

from bench.bundler_load import ProcessClock, block_shares, load_average, node_pid, open_loop
from bench.node_faults import FaultCounts, faulty_node, play_faults
from bench.node_kind import node_kind_relay
from bench.slow_node import slow_node
from entryway import contracts
from entryway.bundler.rpc_types import user_operation_json
from entryway.bundler.validation.modes import ValidationMode
from entryway.bundler.validation.simulation import Simulator
from entryway.bundler.validation.validation_calls import validation_calls
from entryway.chain.rpc import EthClient, JsonRpcClient, RpcError
from entryway.chain.transactor import Transactor
from entryway.deploy.deployer import ContractDeployer, Deployment
from entryway.deploy.plan import ENTRYWAY_SALT, plan_contract
from entryway.devnet.anvil import free_port
from entryway.devnet.devnet import Devnet, DevnetKeys
from entryway.domain.entry_points import RELEASES, V06, EntryPointVersion, version_at
from entryway.domain.evm import address_bytes
from entryway.domain.signatures import eth_signed_message_digest, sign_digest
from entryway.domain.userop import UserOperation, user_op_hash
from entryway.domain.userop_v06 import op_v06_to_json

ETHER = 10**18
CHAIN_ID = 80002
RECEIPT_POLL_S = 0.1  # how often a waiting client asks for its receipt
RECEIPT_WAIT_S = 180.0  # an accepted op with no receipt by then counts as not included
BLOCK_TIME_S = 1.0
BLOCK_WATCH_S = 0.02  # how often the benchmark notes the node's head (its own connection)
FACTORY = contracts.load("SimpleAccountFactory")
FACTORY_V06 = contracts.load("SimpleAccountFactoryV06")
ACCOUNT = contracts.load("SimpleAccount").abi
EP = contracts.load("EntryPoint").abi


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


class Bench:
    """One client of the bundler, sending ops of SimpleAccounts of the release at
    `entry_point` (made by `factory`, that release's SimpleAccountFactory)."""

    def __init__(self, eth: EthClient, rpc_url: str, entry_point: str, factory: str) -> None:
        self.eth = eth
        self.process_pid: int | None = None  # the bundler's, for its CPU time
        self.bundler = JsonRpcClient(rpc_url, timeout=60)
        self.entry_point = entry_point
        self.factory = factory
        self.version = version_at(entry_point)
        release = V06 if self.version is EntryPointVersion.V06 else RELEASES[self.version]
        self.factory_abi = contracts.load(release.artifact("SimpleAccountFactory")).abi

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
            factory_data=self.factory_abi.encode_call("createAccount", owner.address, 0)
            if deploy
            else b"",
        )
        digest = user_op_hash(op, self.entry_point, CHAIN_ID)
        if self.version in (EntryPointVersion.V06, EntryPointVersion.V07):  # they check EIP-191
            digest = eth_signed_message_digest(digest)
        return op.with_signature(sign_digest(bytes(owner.key), digest))

    async def send(self, op: UserOperation) -> str:
        return str(
            await self.bundler.request("eth_sendUserOperation", [self.wire(op), self.entry_point])
        )

    def wire(self, op: UserOperation) -> dict[str, Any]:
        """The op in the JSON shape of its release (v0.6 has its own)."""
        if self.version is EntryPointVersion.V06:
            return op_v06_to_json(op.as_v06())
        return user_operation_json(op)

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
            self.factory, self.factory_abi.encode_call("getAddress", owner.address, 0)
        )
        sender = self.factory_abi.decode_output("getAddress", raw)[0]
        await self.eth.rpc.request("anvil_setBalance", [sender, hex(10 * ETHER)])
        return owner, sender


@dataclass(frozen=True, slots=True)
class ServedDevnet:
    """A devnet chain with `entryway bundler` serving it over HTTP at `rpc_url`, and the
    v0.8 release's SimpleAccountFactory deployed at `simple_account_factory` (v0.6's at
    `simple_account_factory_v06`)."""

    eth: EthClient
    rpc_url: str
    deployment: Deployment
    simple_account_factory: str
    simple_account_factory_v06: str
    pid: int | None = None
    executors: tuple[str, ...] = ()  # the bundler's executor addresses
    validation_mode: str = "auto"  # as the bundler was given it

    def bench(self, version: EntryPointVersion = EntryPointVersion.V08) -> Bench:
        """A client sending ops of SimpleAccounts of the release `version`."""
        if version is EntryPointVersion.V06:
            bench = Bench(self.eth, self.rpc_url, V06.address, self.simple_account_factory_v06)
            bench.process_pid = self.pid
            return bench
        other = {
            EntryPointVersion.V07: (
                self.deployment.entry_point_v07,
                self.deployment.simple_account_factory_v07,
            ),
            EntryPointVersion.V09: (
                self.deployment.entry_point_v09,
                self.deployment.simple_account_factory_v09,
            ),
        }
        if version in other:
            entry_point, factory = other[version]
            assert entry_point is not None and factory is not None, f"no v{version} here"
        else:
            entry_point, factory = self.deployment.entry_point, self.simple_account_factory
        bench = Bench(self.eth, self.rpc_url, entry_point, factory)
        bench.process_pid = self.pid
        return bench


@asynccontextmanager
async def served_devnet(
    executors: int,
    *,
    block_gas_limit: int | None = None,
    trust_factory: bool = False,
    node_latency_ms: float = 0.0,
    faults: FaultCounts | None = None,
    validation_mode: ValidationMode | None = None,
) -> AsyncIterator[ServedDevnet]:
    """With `block_gas_limit`, the devnet's blocks carry that much gas; with `trust_factory`,
    the bundler trusts the SimpleAccountFactory (reputation never throttles it); with
    `node_latency_ms`, the bundler reaches the node through a relay holding each request
    that long (`bench.slow_node`); with `faults`, through one that drops some of its
    transactions, counted there (`bench.node_faults`); with `validation_mode`, the bundler
    is pinned to it (`native` through a relay answering as geth, `bench.node_kind`)."""
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            Devnet(Path(tmp), [CHAIN_ID], block_time_s=BLOCK_TIME_S) as devnet,
            contextlib.AsyncExitStack() as stack,
        ):
            chain = devnet.chains[0]
            async with JsonRpcClient(chain.rpc_url) as rpc:
                eth = EthClient(rpc)
                executor_file = Path(tmp) / "executors.key"
                keys = [Account.create() for _ in range(executors)]
                for key in keys:
                    await rpc.request("anvil_setBalance", [key.address, hex(1000 * ETHER)])
                executor_file.write_text("\n".join(k.key.hex() for k in keys))
                if block_gas_limit is not None:
                    await rpc.request("evm_setBlockGasLimit", [hex(block_gas_limit)])
                    await rpc.request("anvil_mine", ["0x1"])
                factory, factory_v06 = await deploy_simple_account_factories(
                    eth, devnet.keys, chain.deployment.entry_point
                )
                port = free_port()
                trusted = ["--trusted-entity", factory] if trust_factory else []
                # The bundler talks to anvil itself, as a bundler talks to its node: the
                # devnet's fee layer (for the clients' fee questions) runs in this process,
                # and relaying every trace through it would bill this process's CPU, and the
                # load generator's turns, for the bundler's node calls.
                node_url = devnet.node_url(CHAIN_ID)
                if node_latency_ms:
                    node_url = await stack.enter_async_context(
                        slow_node(chain.rpc_url, node_latency_ms)
                    )
                if faults is not None:
                    node_url = await stack.enter_async_context(faulty_node(node_url, faults))
                pinned = []
                if validation_mode is not None:
                    pinned = ["--validation-mode", validation_mode.value]
                if validation_mode is ValidationMode.NATIVE:
                    node_url = await stack.enter_async_context(node_kind_relay(node_url, "geth"))
                proc = await asyncio.create_subprocess_exec(
                    str(Path(sys.executable).with_name("entryway")), "bundler",
                    "--rpc-url", node_url, "--executor-key-file", str(executor_file),
                    "--port", str(port), "--auto-bundle-interval", "0.1", "--debug-rpc",
                    *trusted, *pinned,
                )  # fmt: skip
                try:
                    served = ServedDevnet(
                        eth,
                        f"http://127.0.0.1:{port}/rpc",
                        chain.deployment,
                        factory,
                        factory_v06,
                        proc.pid,
                        tuple(k.address for k in keys),
                        validation_mode.value if validation_mode is not None else "auto",
                    )
                    async with JsonRpcClient(served.rpc_url) as probe:
                        for _ in range(100):
                            try:
                                await probe.request("eth_chainId")
                                break
                            except Exception:
                                await asyncio.sleep(0.1)
                    yield served
                finally:
                    proc.terminate()
                    await proc.wait()


async def deploy_simple_account_factories(
    eth: EthClient, keys: DevnetKeys, entry_point: str
) -> tuple[str, str]:
    """The v0.8 release's SimpleAccountFactory (for `entry_point`) and v0.6's, deployed by
    the devnet's operator where they are not yet: their addresses."""
    deployer = ContractDeployer(eth, Transactor(eth, keys.operator, CHAIN_ID))
    init = FACTORY.bytecode + bytes(12) + address_bytes(entry_point)
    plan = plan_contract("simple", "SimpleAccountFactory", ENTRYWAY_SALT, init)
    await deployer.ensure(plan)
    init = FACTORY_V06.bytecode + bytes(12) + address_bytes(V06.address)
    plan_v06 = plan_contract("simpleV06", "SimpleAccountFactoryV06", ENTRYWAY_SALT, init)
    await deployer.ensure(plan_v06)
    return plan.address, plan_v06.address


async def run(args: argparse.Namespace) -> dict[str, Any]:
    faults = FaultCounts() if args.faults else None
    async with served_devnet(
        args.executors,
        block_gas_limit=args.block_gas_limit,
        trust_factory=args.trust_factory,
        node_latency_ms=args.node_latency_ms,
        faults=faults,
        validation_mode=ValidationMode(args.validation_mode) if args.validation_mode else None,
    ) as served:
        bench = served.bench()
        print(f"validation_mode: {served.validation_mode}", flush=True)
        try:
            if args.open_loop:
                return await open_loop_run(bench, args)
            if faults is not None:  # the inclusion workload, with the node's faults played
                result = await inclusion(
                    [bench], args, during=lambda: play_faults(served.eth, served.executors, faults)
                )
                return {**result, **vars(faults), "dropped_hashes": len(faults.dropped_hashes)}
            if not args.validate:  # --validate 0: the inclusion workload only
                return await inclusion([bench], args)
            return await measure(bench, served.eth, args)
        finally:
            await bench.bundler.aclose()


async def measure(bench: Bench, eth: EthClient, args: argparse.Namespace) -> dict[str, Any]:
    return {**await inclusion([bench], args), **await validation_throughput(bench, eth, args)}


@dataclass
class Samples:
    """What the clients of one release (or of all) saw in the measured part."""

    latencies: list[float] = field(default_factory=list)  # send to receipt, s
    accept: list[float] = field(default_factory=list)  # eth_sendUserOperation, s
    # After the accept: until the op's block first appears at the node (waiting for the
    # bundle, then for the block), and from there until the client has the receipt.
    to_block: list[float] = field(default_factory=list)
    to_receipt: list[float] = field(default_factory=list)
    op_hashes: list[str] = field(default_factory=list)
    accounts: int = 0
    refused: list[str] = field(default_factory=list)  # the bundler's answers to refused sends
    not_included: int = 0  # accepted ops with no receipt within RECEIPT_WAIT_S

    def __iadd__(self, other: Samples) -> Samples:
        self.refused += other.refused
        self.not_included += other.not_included
        self.latencies += other.latencies
        self.accept += other.accept
        self.to_block += other.to_block
        self.to_receipt += other.to_receipt
        self.op_hashes += other.op_hashes
        self.accounts += other.accounts
        return self


async def inclusion(
    benches: Sequence[Bench],
    args: argparse.Namespace,
    *,
    during: Callable[[], Coroutine[Any, Any, None]] | None = None,
) -> dict[str, Any]:
    """The lockstep workload: `args.accounts` users each send `args.ops` sequential ops
    through the bundler, after an unmeasured warm-up that deploys every account. The users
    are dealt to `benches` in turn (one release's SimpleAccounts each); with more than one,
    each release's figures follow the overall ones, prefixed `v0.7_`, `v0.8_`. `during` runs
    beside the measured part, cancelled at its end. A user whose op is refused, or not
    included within RECEIPT_WAIT_S, stops there (counted: `refused`, `not_included`)."""
    # Warm-up (not measured): deploy every account with its first op.
    dealt = [benches[i % len(benches)] for i in range(args.accounts)]
    accounts = [(bench, *await bench.new_account()) for bench in dealt]
    hashes = [(b, await b.send(await b.op(o, s, 0, True))) for b, o, s in accounts]
    await asyncio.gather(*(b.receipt(h) for b, h in hashes))

    samples = {bench.version: Samples() for bench in benches}
    block_seen: dict[int, float] = {}  # block number -> when the node first showed it

    async def watch_blocks() -> None:
        while True:
            number = await benches[0].eth.block_number()
            block_seen.setdefault(number, time.monotonic())
            await asyncio.sleep(BLOCK_WATCH_S)

    async def user(bench: Bench, owner: Any, sender: str) -> None:
        seen = samples[bench.version]
        seen.accounts += 1
        for k in range(args.ops):
            op = await bench.op(owner, sender, k + 1, False)
            start = time.monotonic()
            try:
                op_hash = await bench.send(op)
            except RpcError as exc:
                seen.refused.append(exc.message)
                return
            accepted = time.monotonic()
            seen.accept.append(accepted - start)
            try:
                receipt = await bench.receipt(op_hash, within_s=RECEIPT_WAIT_S)
            except TimeoutError:
                seen.not_included += 1
                return
            done = time.monotonic()
            assert receipt["success"], receipt
            seen.latencies.append(done - start)
            mined = block_seen.get(int(receipt["receipt"]["blockNumber"], 16), done)
            seen.to_block.append(max(mined - accepted, 0.0))
            seen.to_receipt.append(done - max(mined, accepted))
            seen.op_hashes.append(op_hash)

    watcher = asyncio.create_task(watch_blocks())
    beside = asyncio.create_task(during()) if during is not None else None
    clock = ProcessClock(benches[0].process_pid)
    node_clock = ProcessClock(node_pid())
    clock.start()
    node_clock.start()
    client_cpu = time.process_time()
    start = time.monotonic()
    await asyncio.gather(*(user(b, o, s) for b, o, s in accounts))
    elapsed = time.monotonic() - start
    client_cpu = time.process_time() - client_cpu
    node_cpu_s = node_clock.seconds()
    for task in (watcher, beside):
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    cpu_s = clock.seconds()
    overall = Samples()
    for seen in samples.values():
        overall += seen
    result = await figures(benches[0], overall, elapsed)
    result |= {
        "cpu_s_per_1000_ops": cpu_s / len(overall.op_hashes) * 1000,
        # Where else the 2 cores went: the node (anvil), and this benchmark's process (its
        # clients, and the devnet's fee layer, which the clients' own node calls go through).
        "node_cpu_s_per_1000_ops": node_cpu_s / len(overall.op_hashes) * 1000,
        "bench_process_cpu_s_per_1000_ops": client_cpu / len(overall.op_hashes) * 1000,
        "load_average": load_average(),
        **await block_shares(benches[0], overall.op_hashes),
    }
    if len(benches) > 1:
        for version, seen in samples.items():
            by_version = await figures(benches[0], seen, elapsed)
            result |= {f"v{version.value}_{key}": value for key, value in by_version.items()}
    return result


async def figures(bench: Bench, seen: Samples, elapsed: float) -> dict[str, Any]:
    gas_per_op, bundles = await bundle_gas_per_op(bench, seen.op_hashes)
    return {
        "ops": len(seen.op_hashes),
        "refused": len(seen.refused),
        "not_included": seen.not_included,
        "included_ops_per_s": len(seen.op_hashes) / elapsed,
        "included_ops_per_s_per_account": len(seen.op_hashes) / elapsed / seen.accounts,
        "p50_s": statistics.median(seen.latencies),
        "p95_s": percentile(seen.latencies, 95),
        "accept_p50_ms": statistics.median(seen.accept) * 1000,
        "accepted_to_block_p50_ms": statistics.median(seen.to_block) * 1000,
        "block_to_receipt_p50_ms": statistics.median(seen.to_receipt) * 1000,
        "gas_per_op": gas_per_op,
        "ops_per_bundle": len(seen.op_hashes) / bundles,
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

    # What validation alone costs the node and the bundler (nothing is bundled meanwhile).
    node_clock, bundler_clock = ProcessClock(node_pid()), ProcessClock(bench.process_pid)
    node_clock.start()
    bundler_clock.start()
    start = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(args.concurrency)))
    accepted_per_s = len(ops) / (time.monotonic() - start)
    cpu_ms_per_op = {
        "validation_node_cpu_ms_per_op": node_clock.seconds() / len(ops) * 1000,
        "validation_bundler_cpu_ms_per_op": bundler_clock.seconds() / len(ops) * 1000,
    }

    # Ceilings, straight to the node at the same concurrency, responses parsed: the traced
    # simulateValidation other bundlers run, and this bundler's own pair of node calls (the
    # untraced simulateValidation beside the traced replay of the entity calls).
    simulator = Simulator(eth, bench.entry_point)
    raw = await eth.call(bench.entry_point, EP.encode_call("senderCreator"))
    sender_creator = EP.decode_output("senderCreator", raw)[0]

    async def full_trace(op: UserOperation) -> None:
        await simulator.trace_validation(op)

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
        **cpu_ms_per_op,
        "traced_simulations_per_s": full_ceiling,
        "validation_vs_full_trace_ceiling": accepted_per_s / full_ceiling,
        "replayed_validations_per_s": replay_ceiling,
        "validation_vs_replay_ceiling": accepted_per_s / replay_ceiling,
    }


async def open_loop_run(bench: Bench, args: argparse.Namespace) -> dict[str, Any]:
    """The open-loop mode: accounts deployed (unmeasured), then the rate steps."""
    accounts = [await bench.new_account() for _ in range(args.accounts)]
    hashes = [await bench.send(await bench.op(o, s, 0, True)) for o, s in accounts]
    await asyncio.gather(*(bench.receipt(h) for h in hashes))
    rates = [int(r) for r in args.open_loop.split(",")]
    steps = await open_loop(bench, accounts, rates, args.step_s, BLOCK_TIME_S)
    return {f"{int(s['offered_ops_per_s'])}/s {k}": v for s in steps for k, v in s.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accounts", type=int, default=50)
    parser.add_argument("--ops", type=int, default=4)
    parser.add_argument("--executors", type=int, default=4)
    parser.add_argument("--validate", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--block-gas-limit", type=int, default=30_000_000)
    parser.add_argument(
        "--trust-factory", action="store_true", help="the bundler trusts SimpleAccountFactory"
    )
    parser.add_argument(
        "--open-loop", default="", help="rates to step through, ops/s: e.g. 50,100,150,200"
    )
    parser.add_argument("--step-s", type=float, default=20.0, help="seconds at each rate")
    parser.add_argument(
        "--node-latency-ms",
        type=float,
        default=0.0,
        help="the bundler reaches the node through a relay holding each request this long",
    )
    parser.add_argument(
        "--validation-mode",
        choices=[m.value for m in ValidationMode],
        default=None,
        help="pin the bundler's validation mode (default: the strongest anvil serves, opcodes); "
        "native goes through a relay playing geth's erc7562Tracer by a JavaScript tracer",
    )
    parser.add_argument(
        "--faults",
        action="store_true",
        help="the node drops some bundles, its fee spikes, an executor is drained for a while "
        "(bench/node_faults.py); the inclusion workload alone",
    )
    result = asyncio.run(run(parser.parse_args()))
    for key, value in result.items():
        print(f"{key}: {value:.3f}" if isinstance(value, float) else f"{key}: {value}")


if __name__ == "__main__":
    main()
