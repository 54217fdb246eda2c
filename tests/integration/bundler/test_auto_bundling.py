"""Auto mode on a chain with a steady block interval: the ops validated during a block wait
for a deadline shortly before the next block and go out together, in one bundle mined in
that block. On real anvil, switched to 1 s interval mining for the test."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from eth_account.signers.local import LocalAccount

from entryway.bundler.service import Bundler
from entryway.bundler.standalone import StandaloneSettings, build_bundler
from entryway.bundler.states import BundlingMode, OpStatus
from entryway.chain.rpc import EthClient
from entryway.devnet.devnet import Devnet
from tests.integration.harness import ETHER, Harness

OPS = 4


@pytest.fixture
async def accounts(harness: Harness) -> list[tuple[LocalAccount, str]]:
    """Deployed accounts (deployed while the node still mines each transaction at once)."""
    owners = [Harness.new_key() for _ in range(OPS)]
    ops = []
    for owner in owners:
        op = await harness.build_op(owner.address, b"")
        await harness.fund(op.sender, ETHER)
        ops.append(harness.sign(op, owner))
    bundle = await harness.handle_ops(ops)
    assert all(o.success for o in bundle.outcomes)
    return [(owner, op.sender) for owner, op in zip(owners, ops, strict=True)]


@pytest.fixture
async def interval_mined(
    devnet: Devnet, eth: EthClient, harness: Harness
) -> AsyncIterator[Bundler]:
    """An auto-mode bundler on the devnet mining a block every second."""
    key = Harness.new_key()
    await harness.fund(key.address, 10 * ETHER)
    await eth.rpc.request("evm_setIntervalMining", [1])
    try:
        rpc = await build_bundler(
            eth,
            StandaloneSettings(
                rpc_url=devnet.chains[0].rpc_url,
                entry_point=devnet.chains[0].deployment.entry_point,
                executor_keys=(key,),
                mode=BundlingMode.AUTO,
                auto_bundle_interval_s=0.05,
            ),
        )
        await rpc.bundler.start()
        try:
            yield rpc.bundler
        finally:
            await rpc.bundler.stop()
    finally:
        await eth.rpc.request("evm_setIntervalMining", [0])
        await eth.rpc.request("evm_setAutomine", [True])


def _before_deadline_s(bundler: Bundler) -> float:
    """How long until the bundler's deadline for the next block."""
    now = time.monotonic()
    deadline = bundler.auto.schedule.deadline(now)
    assert deadline is not None
    return deadline - now


async def test_ops_of_one_block_go_out_in_one_bundle_just_before_it(
    interval_mined: Bundler,
    accounts: list[tuple[LocalAccount, str]],
    harness: Harness,
    eth: EthClient,
) -> None:
    bundler = interval_mined
    give_up = time.monotonic() + 20
    while bundler.auto.clock.interval() is None:  # a few blocks seen arriving
        assert time.monotonic() < give_up, "the block clock never found the 1 s interval"
        await asyncio.sleep(0.1)
    # On a busy machine the four sends can take most of a block: then nothing shows the ops
    # waiting, and the round is tried again with the accounts' next ops.
    for _round in range(3):
        ops = []
        for owner, sender in accounts:
            op = await harness.build_op(owner.address, b"", sender=sender)
            ops.append(harness.sign(op, owner))
        seen = await eth.block_number()
        while await eth.block_number() == seen:  # noqa: ASYNC110 (start right after a block)
            await asyncio.sleep(0.02)
        sent_after = seen + 1
        hashes = await asyncio.gather(*(bundler.send(op) for op in ops))
        timed = _before_deadline_s(bundler) > 0.2
        if timed:
            await asyncio.sleep(0.1)
            # A plain periodic bundler (every 0.05 s here) would have sent them by now.
            assert {bundler.tracked[h].status for h in hashes} == {OpStatus.PENDING}
        deadline = time.monotonic() + 10
        while any(bundler.tracked[h].status is not OpStatus.INCLUDED for h in hashes):
            assert time.monotonic() < deadline, "the ops were not mined"
            await asyncio.sleep(0.05)
        if not timed:
            continue
        receipts = [await bundler.receipts.receipt(h) for h in hashes]
        assert all(r is not None for r in receipts)
        assert len({r["receipt"]["transactionHash"] for r in receipts if r}) == 1
        mined_in = {int(r["receipt"]["blockNumber"], 16) for r in receipts if r}
        assert mined_in == {sent_after + 1}, "the bundle missed the block it was timed for"
        return
    pytest.fail("three rounds of sends each took most of a block: the timing went unchecked")
