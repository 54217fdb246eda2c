"""Validation modes by kind of node: what one op's validation costs in each mode.

Method: a devnet anvil (chain id 80002, a block per transaction) started by this benchmark,
the v0.8 release's SimpleAccountFactory deployed on it. Two kinds of op, as the bundler
benchmark makes them (`bench.bundler.Bench.op`): a deploy op (a fresh SimpleAccount made by
its factory in validation) and a plain op (an account deployed beforehand, by a handleOps
bundle sent in the set-up). Each is validated by the bundler's own `Validator`, in this
process, one validation at a time, in each mode: `opcodes` (the struct logger), `calls`
(callTracer, prestateTracer and prestateTracer in diff mode, side by side) and `untraced`
(eth_call only), each on anvil itself; and `native` through the test suite's relay
answering as geth (`bench.node_kind`, its own process), where anvil runs the JavaScript
tracer that plays geth's erc7562Tracer. That last row is the script's cost on anvil, not
geth's: geth runs its tracer natively, and no geth is at hand here.

Every validation is of an op no validator has seen before (a fresh `Validator` each round);
the first few of a round are a warm-up, not counted. Latency is the wall time of
`Validator.validate`, pooled over the rounds (median, p90). The node's CPU time is anvil's
(user + system, from /proc/<pid>/stat) over each round's counted validations, and the
bundler's is this process's over the same spans (reading the answers, judging the rules);
each is given per validation as the total over the rounds divided by the validations
counted: the kernel counts CPU time in ticks of 10 ms, so a round's reading is uncertain by
a tick, and a median of rounds would keep that uncertainty where a total divides it by the
rounds. The modes take turns within a round, in an order rotated at each round, so that a
change in the machine's load falls on all of them alike.

Run: `make bench-validation-modes` (or `python -m bench.validation_modes --rounds 3`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bench.bundler import CHAIN_ID, EP, Bench, deploy_simple_account_factories, percentile
from bench.bundler_load import ProcessClock, node_pid
from bench.docs import write_section
from bench.multiprocess import commit, machine
from bench.node_kind import node_kind_relay
from entryway.bundler.releases import sender_creator_of, simulator_for
from entryway.bundler.validation.modes import ValidationMode
from entryway.bundler.validation.rules import RuleSettings
from entryway.bundler.validation.simulation import Validator
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.chain.transactor import Transactor
from entryway.devnet.devnet import Devnet
from entryway.domain.entry_points import EntryPointVersion
from entryway.domain.userop import UserOperation

HANDLE_OPS_CHUNK = 20  # deploy ops per set-up bundle
MODES = (
    ValidationMode.OPCODES,
    ValidationMode.CALLS,
    ValidationMode.UNTRACED,
    ValidationMode.NATIVE,
)
NODES = {
    ValidationMode.OPCODES: "anvil",
    ValidationMode.CALLS: "anvil (as a hosted node would be asked)",
    ValidationMode.UNTRACED: "anvil (as a public endpoint would be asked)",
    ValidationMode.NATIVE: "geth relay on anvil: erc7562Tracer emulated in JavaScript",
}


@dataclass
class Figures:
    """One op kind in one mode, over the rounds."""

    latencies_ms: list[float] = field(default_factory=list)
    node_cpu_s: float = 0.0  # over the counted validations
    bundler_cpu_s: float = 0.0
    counted: int = 0

    @property
    def node_ms(self) -> float:
        return self.node_cpu_s / self.counted * 1000

    @property
    def bundler_ms(self) -> float:
        return self.bundler_cpu_s / self.counted * 1000


@dataclass(frozen=True, slots=True)
class Setting:
    """What every validator is built from: the chain's EntryPoint and its SenderCreator."""

    entry_point: str
    sender_creator: str
    rules: RuleSettings


@asynccontextmanager
async def node_clients(node_url: str) -> AsyncIterator[dict[ValidationMode, EthClient]]:
    """A client per mode: anvil itself, or for `native` the relay playing geth."""
    async with contextlib.AsyncExitStack() as stack:
        geth = await stack.enter_async_context(node_kind_relay(node_url, "geth"))
        clients = {}
        for mode in MODES:
            url = geth if mode is ValidationMode.NATIVE else node_url
            clients[mode] = EthClient(await stack.enter_async_context(JsonRpcClient(url)))
        yield clients


async def op_sets(
    maker: Bench, transactor: Transactor, count: int
) -> dict[str, list[UserOperation]]:
    """`count` deploy ops of fresh accounts, and `count` plain ops of accounts deployed here
    (by handleOps bundles the devnet's operator sends)."""
    deploys = []
    for _ in range(count):
        owner, sender = await maker.new_account()
        deploys.append(await maker.op(owner, sender, 0, True))
    deployed = [await maker.new_account() for _ in range(count)]
    firsts = [await maker.op(o, s, 0, True) for o, s in deployed]
    for at in range(0, count, HANDLE_OPS_CHUNK):
        chunk = [op.packed() for op in firsts[at : at + HANDLE_OPS_CHUNK]]
        await transactor.send(
            maker.entry_point, EP.encode_call("handleOps", chunk, transactor.address)
        )
    plains = [await maker.op(o, s, 1, False) for o, s in deployed]
    return {"deploy op": deploys, "plain op": plains}


async def one_round(
    validator: Validator, ops: list[UserOperation], warmup: int, figures: Figures
) -> None:
    for op in ops[:warmup]:
        await validator.validate(op, now=int(time.time()))
    counted = ops[warmup:]
    node, bundler = ProcessClock(node_pid()), ProcessClock(os.getpid())
    node.start()
    bundler.start()
    for op in counted:
        start = time.perf_counter()
        await validator.validate(op, now=int(time.time()))
        figures.latencies_ms.append((time.perf_counter() - start) * 1000)
    figures.node_cpu_s += node.seconds()
    figures.bundler_cpu_s += bundler.seconds()
    figures.counted += len(counted)


async def run(args: argparse.Namespace) -> tuple[dict[tuple[str, ValidationMode], Figures], str]:
    results: dict[tuple[str, ValidationMode], Figures] = defaultdict(Figures)
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            Devnet(Path(tmp), [CHAIN_ID]) as devnet,
            JsonRpcClient(devnet.chains[0].rpc_url) as rpc,
        ):
            eth = EthClient(rpc)
            entry_point = devnet.chains[0].deployment.entry_point
            factory, _ = await deploy_simple_account_factories(eth, devnet.keys, entry_point)
            node_url = devnet.node_url(CHAIN_ID)
            maker = Bench(eth, node_url, entry_point, factory)  # its bundler client unused
            transactor = Transactor(eth, devnet.keys.operator, CHAIN_ID)
            ops = await op_sets(maker, transactor, args.warmup + args.validations)
            await maker.bundler.aclose()
            setting = Setting(
                entry_point,
                await sender_creator_of(eth, entry_point),
                RuleSettings(min_stake_wei=10**18).for_version(EntryPointVersion.V08),
            )
            client = str(await rpc.request("web3_clientVersion"))
            async with node_clients(node_url) as clients:
                for r in range(args.rounds):
                    order = MODES[r % len(MODES) :] + MODES[: r % len(MODES)]
                    for kind, kind_ops in ops.items():
                        for mode in order:
                            validator = Validator(
                                simulator_for(clients[mode], setting.entry_point),
                                setting.sender_creator,
                                setting.rules,
                                CHAIN_ID,
                                mode=mode,
                            )
                            await one_round(validator, kind_ops, args.warmup, results[kind, mode])
                    print(f"round {r + 1} of {args.rounds} done", flush=True)
    return results, client


def report(results: dict[tuple[str, ValidationMode], Figures]) -> list[str]:
    lines = [
        "| op | mode | node | latency p50 / p90 | node CPU per validation | node CPU vs opcodes "
        "| bundler CPU per validation |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind in sorted({k for k, _ in results}):
        base = results[kind, ValidationMode.OPCODES].node_ms
        for mode in MODES:
            f = results[kind, mode]
            node = f.node_ms
            label = f"{mode.value} (emulated)" if mode is ValidationMode.NATIVE else mode.value
            lines.append(
                f"| {kind} | {label} | {NODES[mode]} | "
                f"{statistics.median(f.latencies_ms):.1f} / {percentile(f.latencies_ms, 90):.1f} "
                f"ms | {node:.2f} ms | {node / base:.2f}x | "
                f"{f.bundler_ms:.2f} ms |"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--validations", type=int, default=50, help="counted, per round")
    parser.add_argument("--warmup", type=int, default=5, help="validations not counted, per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--write-doc", action="store_true")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    results, client = asyncio.run(run(args))
    load_after = os.getloadavg()[0]
    lines = [
        f"Measured at {commit()} on {time.strftime('%Y-%m-%d', time.gmtime())}; {machine()}; "
        f"{client}; {args.rounds} rounds of {args.validations} counted validations per op and "
        f"mode (after {args.warmup} not counted). Load average (1 min) {load_before:.2f} "
        f"before, {load_after:.2f} after.",
        "",
        *report(results),
    ]
    print("\n".join(lines))
    if args.write_doc:
        write_section(
            "validation-modes",
            "Validation modes by kind of node (`python -m bench.validation_modes`)",
            "Method: " + (__doc__ or "").split("Method: ", 1)[1].split("Run:")[0],
            lines,
        )


if __name__ == "__main__":
    main()
