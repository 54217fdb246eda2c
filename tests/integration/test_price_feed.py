"""The native token price read from a Chainlink-style feed on the devnet: followed while
fresh, the configured price when the round is stale, the feed absent or the node down."""

from __future__ import annotations

import logging

import pytest

from entryway import contracts
from entryway.chain.price_feed import NativePriceFeed
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.chain.transactor import Transactor
from entryway.deploy.deployer import ContractDeployer, devnet_price_feed_plan
from entryway.domain.token_prices import NativeTokenPrices
from tests.integration.harness import Harness

FEED = contracts.load("DevnetPriceFeed").abi
CHAIN = 80002
CONFIGURED = 200_000  # 0.20 EUR per POL


async def _feed(harness: Harness, micro_eur: int) -> str:
    plan = devnet_price_feed_plan(harness.operator.address, "POL", micro_eur)
    await ContractDeployer(harness.eth, harness.executor).ensure(plan)
    return plan.address


async def _follower(eth: EthClient, feed: str, prices: NativeTokenPrices) -> NativePriceFeed:
    """A follower whose clock is the devnet's: tests sharing the devnet may have moved its
    time ahead of the wall clock, and the feed's rounds carry the chain's time."""
    block = await eth.get_block("latest")
    now = float(int(block["timestamp"], 16))
    follower = NativePriceFeed(CHAIN, eth, feed, 3_600, prices)
    follower.clock = lambda: now
    return follower


async def test_a_fresh_feed_sets_the_price(harness: Harness) -> None:
    feed = await _feed(harness, 215_000)
    prices = NativeTokenPrices({CHAIN: CONFIGURED})
    assert await (await _follower(harness.eth, feed, prices)).refresh()
    assert prices[CHAIN] == 215_000


async def test_a_stale_round_falls_back_to_the_configured_price(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    feed = await _feed(harness, 216_000)
    prices = NativeTokenPrices({CHAIN: CONFIGURED})
    follower = await _follower(harness.eth, feed, prices)
    assert await follower.refresh() and prices[CHAIN] == 216_000

    block = await harness.eth.get_block("latest")
    two_hours_ago = int(block["timestamp"], 16) - 7_200
    operator = Transactor(harness.eth, harness.operator, CHAIN)
    await harness.fund(harness.operator.address, 10**18)
    await operator.send(feed, FEED.encode_call("setRound", 30_000_000, two_hours_ago))
    follower.clock = lambda: two_hours_ago + 7_200.0
    with caplog.at_level(logging.WARNING, "entryway.prices"):
        assert not await follower.refresh()
    assert prices[CHAIN] == CONFIGURED
    assert "old" in caplog.text and "configured price" in caplog.text

    await operator.send(feed, FEED.encode_call("setRound", 30_000_000, 0))  # fresh again
    assert await follower.refresh() and prices[CHAIN] == 300_000


async def test_no_feed_at_the_address_falls_back(harness: Harness) -> None:
    prices = NativeTokenPrices({CHAIN: CONFIGURED})
    prices.follow_feed(CHAIN, 999_999)  # an earlier reading
    nothing = "0x" + "00" * 19 + "42"
    assert not await (await _follower(harness.eth, nothing, prices)).refresh()
    assert prices[CHAIN] == CONFIGURED


async def test_an_unreachable_node_falls_back() -> None:
    prices = NativeTokenPrices({CHAIN: CONFIGURED})
    prices.follow_feed(CHAIN, 999_999)
    async with JsonRpcClient("http://127.0.0.1:9") as rpc:  # nothing listens on port 9
        follower = NativePriceFeed(CHAIN, EthClient(rpc), "0x" + "11" * 20, 3_600, prices)
        assert not await follower.refresh()
    assert prices[CHAIN] == CONFIGURED
