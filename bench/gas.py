"""Gas of Entryway's contracts next to the reference SimpleAccount (same npm release).

Method: a fresh anvil devnet (prague) with everything deployed; each op is sent alone in
`handleOps` by an EOA executor, sponsored by Entryway's VerifyingPaymaster, with the same gas
limits and fees for both account kinds. Reported: the whole handleOps transaction's gasUsed
and the EntryPoint's `actualGasUsed` for the op (which includes preVerificationGas, 60,000
here), plus the anchor transaction. Run: `make bench-gas`; it rewrites the table in
docs/benchmarks.md between its markers.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

from entryway import contracts
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.chain.transactor import Transactor
from entryway.deploy.deployer import ContractDeployer
from entryway.deploy.plan import ENTRYWAY_SALT, plan_contract
from entryway.devnet.devnet import Devnet
from tests.integration.harness import ACCOUNT, ETHER, NOTARY, Harness

CHAIN_ID = 80002
DOC = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
BEGIN, END = "<!-- gas:begin -->", "<!-- gas:end -->"


async def measure_account(h: Harness, factory: str, factory_abi: object) -> tuple[int, ...]:
    owner = h.new_key()
    create = await h.build_op(owner.address, b"", factory_address=factory, factory_abi=factory_abi)
    deployed = await h.handle_ops([h.sign(h.sponsor(create), owner)])
    await h.fund(create.sender, ETHER)
    transfer_call = ACCOUNT.encode_call("execute", h.new_key().address, 10**15, b"")
    transfer = await h.build_op(owner.address, transfer_call, sender=create.sender)
    sent = await h.handle_ops([h.sign(h.sponsor(transfer), owner)])
    assert deployed.outcomes[0].success and sent.outcomes[0].success
    return (
        deployed.receipt.gas_used,
        deployed.outcomes[0].actual_gas_used,
        sent.receipt.gas_used,
        sent.outcomes[0].actual_gas_used,
    )


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        async with Devnet(Path(tmp), [CHAIN_ID]) as devnet:
            chain = devnet.chains[0]
            async with JsonRpcClient(chain.rpc_url) as rpc:
                eth = EthClient(rpc)
                executor = Harness.new_key()
                await rpc.request("anvil_setBalance", [executor.address, hex(1000 * ETHER)])
                h = Harness(
                    eth=eth,
                    chain_id=CHAIN_ID,
                    deployment=chain.deployment,
                    paymaster_signer=devnet.keys.paymaster_signer,
                    operator=devnet.keys.operator,
                    executor=Transactor(eth, executor, CHAIN_ID),
                )
                simple_factory = contracts.load("SimpleAccountFactory")
                init = (
                    simple_factory.bytecode
                    + bytes(12)
                    + bytes.fromhex(chain.deployment.entry_point[2:])
                )
                plan = plan_contract(
                    "simpleAccountFactory", "SimpleAccountFactory", ENTRYWAY_SALT, init
                )
                await ContractDeployer(eth, Transactor(eth, devnet.keys.operator, CHAIN_ID)).ensure(
                    plan
                )
                ours = await measure_account(
                    h, chain.deployment.account_factory, contracts.load("AccountFactory").abi
                )
                simple = await measure_account(h, plan.address, simple_factory.abi)
                anchor = await Transactor(eth, devnet.keys.notary_submitter, CHAIN_ID).send(
                    chain.deployment.notary, NOTARY.encode_call("anchor", os.urandom(32), 1000)
                )
    rows = [
        "| operation | Entryway SmartAccount (tx / op) | SimpleAccount v0.8 (tx / op) |",
        "|---|---|---|",
        f"| account deployment, sponsored, empty call | {ours[0]:,} / {ours[1]:,} "
        f"| {simple[0]:,} / {simple[1]:,} |",
        f"| sponsored native transfer, deployed account | {ours[2]:,} / {ours[3]:,} "
        f"| {simple[2]:,} / {simple[3]:,} |",
        f"| NotaryAnchor.anchor (one root) | {anchor.gas_used:,} | — |",
    ]
    table = "\n".join(rows)
    print(table)
    text = DOC.read_text()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    DOC.write_text(text[:start] + "\n" + table + "\n" + text[end:])


if __name__ == "__main__":
    asyncio.run(main())
