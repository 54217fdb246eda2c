"""The executor keys' watch (real devnet): an executor drained under the floor makes the
`chain.<id>.executors` readiness check fail naming it and its balance, shows in the balance
gauge, and alerts once per crossing; with a funding key the leader tops it up with one
transfer, the standby never."""

from __future__ import annotations

import logging
from functools import partial

import pytest
from eth_account.signers.local import LocalAccount

from entryway.bundler.executor_watch import ExecutorBalance, ExecutorFunding, ExecutorWatch
from entryway.chain.rpc import EthClient
from entryway.chain.transactor import Transactor
from entryway.observability.readiness import NotReadyError
from tests.integration.harness import ETHER, Harness

FLOOR = ETHER // 10
TOP_UP = ETHER // 2


async def drained_executor(eth: EthClient, harness: Harness) -> LocalAccount:
    """An executor that held 1 ETH and sent all but 0.01 ETH away: under the floor."""
    executor = Harness.new_key()
    await harness.fund(executor.address, ETHER)
    sink = Harness.new_key().address
    await Transactor(eth, executor, harness.chain_id).send(sink, value=ETHER - ETHER // 100)
    assert await eth.get_balance(executor.address) < FLOOR
    return executor


class Alerts:
    def __init__(self) -> None:
        self.seen: list[ExecutorBalance] = []

    async def __call__(self, balance: ExecutorBalance) -> None:
        self.seen.append(balance)


async def test_a_drained_executor_fails_readiness_shows_in_the_gauge_and_alerts_once(
    eth: EthClient, harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    rich = Harness.new_key()
    await harness.fund(rich.address, 10 * ETHER)
    poor = await drained_executor(eth, harness)
    alerts = Alerts()
    watch = ExecutorWatch(
        eth, harness.chain_id, [rich.address, poor.address], ExecutorFunding(FLOOR), alert=alerts
    )
    poor_wei = await eth.get_balance(poor.address)
    caplog.set_level(logging.WARNING, "entryway.bundler.executors")

    with pytest.raises(NotReadyError) as refused:
        await watch.readiness()
    assert str(refused.value) == f"under {FLOOR} wei: {poor.address} holds {poor_wei} wei"
    assert rich.address not in str(refused.value)

    [balance, floor, top_ups] = watch.families()
    series = {s.labels["executor"]: s.value for s in balance.samples}
    assert series == {rich.address: 10 * ETHER, poor.address: poor_wei}
    assert balance.samples[0].labels["chain"] == str(harness.chain_id)
    assert floor.samples[0].value == FLOOR
    assert top_ups.samples[0].value == 0

    await watch.check(top_up=True)  # no funding key: nothing to top up with
    await watch.check(top_up=True)
    # Alerted at the first read under the floor (the readiness check's), not at each read.
    assert [(a.executor, a.balance_wei) for a in alerts.seen] == [(poor.address, poor_wei)]
    assert len(warnings_about(caplog, poor.address)) == 1
    assert await eth.get_balance(poor.address) == poor_wei

    # Recovered, then drained again: a new crossing, a new alert.
    await harness.fund(poor.address, ETHER)
    assert "the poorest holds" in await watch.readiness()
    await harness.fund(poor.address, 1)
    await watch.check(top_up=False)
    assert [a.balance_wei for a in alerts.seen] == [poor_wei, 1]
    warned = warnings_about(caplog, poor.address)
    assert len(warned) == 2 and "holds 1 wei" in warned[1]


def warnings_about(caplog: pytest.LogCaptureFixture, executor: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and executor in r.getMessage()
    ]


async def test_the_leader_tops_up_a_drained_executor_from_the_funding_key_once(
    eth: EthClient, harness: Harness
) -> None:
    poor = await drained_executor(eth, harness)
    funder = Harness.new_key()
    await harness.fund(funder.address, 10 * ETHER)
    funding = ExecutorFunding(FLOOR, TOP_UP, funder)
    watch = ExecutorWatch(eth, harness.chain_id, [poor.address], funding)
    before = await eth.get_balance(poor.address)

    await watch.check(top_up=False)  # a standby reads, but never spends the funding key
    assert await eth.get_balance(poor.address) == before
    assert await eth.get_balance(funder.address) == 10 * ETHER

    [after] = await watch.check(top_up=True)
    assert after.balance_wei == before + TOP_UP and not after.low
    assert await eth.get_balance(poor.address) == before + TOP_UP
    assert await eth.get_nonce(funder.address, "latest") == 1
    assert "the poorest holds" in await watch.readiness()

    await watch.check(top_up=True)  # over the floor now: nothing more is sent
    assert await eth.get_nonce(funder.address, "latest") == 1
    assert watch.top_ups == 1
    [_, _, top_ups] = watch.families()
    assert top_ups.samples[0].value == 1


async def test_a_top_up_the_funding_key_cannot_pay_is_logged_and_the_key_stays_low(
    eth: EthClient, harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    poor = await drained_executor(eth, harness)
    funder = Harness.new_key()
    await harness.fund(funder.address, TOP_UP // 10)
    watch = ExecutorWatch(
        eth, harness.chain_id, [poor.address], ExecutorFunding(FLOOR, TOP_UP, funder)
    )
    caplog.set_level(logging.ERROR, "entryway.bundler.executors")
    [after] = await watch.check(top_up=True)
    assert after.low and watch.top_ups == 0
    assert any("cannot top up" in r.getMessage() for r in caplog.records)
    with pytest.raises(NotReadyError):
        await watch.readiness()


async def test_a_top_up_not_mined_yet_is_waited_for_not_sent_again(
    eth: EthClient, harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    poor = await drained_executor(eth, harness)
    before = await eth.get_balance(poor.address)
    funder = Harness.new_key()
    await harness.fund(funder.address, 10 * ETHER)
    watch = ExecutorWatch(
        eth, harness.chain_id, [poor.address], ExecutorFunding(FLOOR, TOP_UP, funder)
    )
    monkeypatch.setattr(eth, "wait_for_receipt", partial(eth.wait_for_receipt, within_s=0.2))
    await eth.rpc.request("evm_setAutomine", [False])
    try:
        [still] = await watch.check(top_up=True)  # sent; not mined within the wait
        assert still.low
        await watch.check(top_up=True)
        await watch.check(top_up=True)
        assert await eth.get_nonce(funder.address, "pending") == 1  # one transfer, no second
        assert watch.top_ups == 1
        await eth.rpc.request("evm_mine", [])
    finally:
        await eth.rpc.request("evm_setAutomine", [True])
    [after] = await watch.check(top_up=True)
    assert after.balance_wei == before + TOP_UP
    assert await eth.get_nonce(funder.address, "latest") == 1
