"""Native token prices: configured per chain, a Chainlink-style round read into micro-euros
with a staleness bound, and what a price does to the credits an op costs."""

from __future__ import annotations

from pathlib import Path

import pytest

from entryway.domain.evm import checksum
from entryway.domain.pricebook import PriceBook
from entryway.domain.token_prices import (
    FeedRound,
    NativeTokenPrices,
    StaleFeedError,
    micro_eur_of,
)
from entryway.settings.model import ChainSettings, PriceSettings, Settings

NOW = 1_800_000_000
HOUR = 3_600


def test_a_fresh_round_is_read_into_micro_euros() -> None:
    # 0.21345678 EUR per POL, 8 decimals as Chainlink's fiat feeds
    assert micro_eur_of(FeedRound(21_345_678, 8, NOW - 60), now=NOW, max_age_s=HOUR) == 213_456
    assert micro_eur_of(FeedRound(3_000, 0, NOW), now=NOW, max_age_s=HOUR) == 3_000_000_000


@pytest.mark.parametrize(
    ("round_", "why"),
    [
        (FeedRound(20_000_000, 8, NOW - HOUR - 1), "old"),
        (FeedRound(20_000_000, 8, NOW + 3_600), "future"),
        (FeedRound(0, 8, NOW), "not a price"),
        (FeedRound(-5, 8, NOW), "not a price"),
        (FeedRound(1, 18, NOW), "out of bounds"),  # rounds to 0 micro-euros
    ],
)
def test_a_round_that_is_stale_or_absurd_is_refused(round_: FeedRound, why: str) -> None:
    with pytest.raises(StaleFeedError, match=why):
        micro_eur_of(round_, now=NOW, max_age_s=HOUR)


def test_prices_follow_the_feed_and_fall_back_to_the_configured_value() -> None:
    prices = NativeTokenPrices({137: 200_000, 8453: 3_000_000_000})
    prices.follow_feed(137, 250_000)
    assert (prices[137], prices[8453], prices.from_feed(137)) == (250_000, 3_000_000_000, True)
    prices.use_configured(137)
    assert (prices[137], prices.from_feed(137)) == (200_000, False)
    assert set(prices) == {137, 8453} and len(prices) == 2


def test_the_token_price_sets_the_credits_of_the_gas() -> None:
    gas_cost_wei = 100_000 * 30 * 10**9  # 100,000 gas at 30 gwei: 0.003 POL
    prices = NativeTokenPrices({137: 200_000})
    book = PriceBook(native_token_micro_eur=prices)
    assert book.gas_credits(137, gas_cost_wei) == 600  # at 0.20 EUR
    prices.follow_feed(137, 400_000)
    assert book.gas_credits(137, gas_cost_wei) == 1_200  # twice the price, twice the credits
    quote = book.sponsored_user_operation(137, calls=1, calldata_bytes=0, gas_cost_wei=gas_cost_wei)
    assert dict(quote.breakdown)["sponsorship"] == 100 + 1_200


def _chain(tmp_path: Path, chain_id: int, **extra: object) -> ChainSettings:
    return ChainSettings(
        chain_id=chain_id,
        rpc_urls=["http://127.0.0.1:8545"],  # type: ignore[list-item]
        executor_key_files=[tmp_path / "executor.key"],
        notary_submitter_key_file=tmp_path / "notary.key",
        deploy_owner="0x" + "11" * 20,
        **extra,  # type: ignore[arg-type]
    )


def test_a_chain_sets_its_own_price_over_the_prices_table(tmp_path: Path) -> None:
    settings = Settings(
        prices=PriceSettings(native_token_micro_eur={137: 300_000, 8453: 2_500_000_000}),
        chains=[
            _chain(tmp_path, 137, native_token_price_micro_eur=180_000),
            _chain(tmp_path, 8453),
        ],
    )
    prices = settings.price_book().native_token_micro_eur
    assert (prices[137], prices[8453], prices[80002]) == (180_000, 2_500_000_000, 200_000)


def test_a_price_feed_is_a_checksummed_address(tmp_path: Path) -> None:
    chain = _chain(tmp_path, 137, price_feed="0x" + "ab" * 20, price_feed_max_age_s=600)
    assert chain.price_feed == checksum("0x" + "ab" * 20)
    assert chain.price_feed_max_age_s == 600
    with pytest.raises(ValueError, match="20-byte"):
        _chain(tmp_path, 137, price_feed="0x1234")
