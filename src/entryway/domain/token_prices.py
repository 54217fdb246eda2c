"""Native token prices in micro-euros per whole token (POL, ETH), by chain: the configured
value, or a fresh reading of the chain's price feed over it. Pure.

A feed is Chainlink-style (AggregatorV3Interface): `latestRoundData()` gives an answer
with `decimals()` decimals and the time it was updated. A reading older than its staleness
bound, in the future, or not positive is not used: the configured price stands.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

MICRO = 10**6
# A price beyond this is a feed's mistake, not a token's price: a trillion euros a token.
MAX_MICRO_EUR = 10**18
# How far a feed's clock may run ahead of ours before its round is refused.
CLOCK_SKEW_S = 300


@dataclass(frozen=True, slots=True)
class FeedRound:
    """One `latestRoundData()` reading: `answer` EUR x 10^`decimals` per token."""

    answer: int
    decimals: int
    updated_at: int  # unix seconds


class StaleFeedError(ValueError):
    """A round the price may not be taken from; the message says why."""


def micro_eur_of(round_: FeedRound, *, now: int, max_age_s: int) -> int:
    """The round's price in micro-euros per token (rounded down), or StaleFeedError."""
    if round_.answer <= 0:
        raise StaleFeedError(f"the feed answers {round_.answer}, not a price")
    if not 0 <= round_.decimals <= 36:
        raise StaleFeedError(f"the feed has {round_.decimals} decimals")
    age = now - round_.updated_at
    if age > max_age_s:
        raise StaleFeedError(f"the feed's last round is {age} s old (bound: {max_age_s} s)")
    if age < -CLOCK_SKEW_S:
        raise StaleFeedError(f"the feed's last round is {-age} s in the future")
    price: int = round_.answer * MICRO // int(10**round_.decimals)
    if not 0 < price <= MAX_MICRO_EUR:
        raise StaleFeedError(f"the feed's price {price} micro-euros is out of bounds")
    return price


class NativeTokenPrices(Mapping[int, int]):
    """Micro-euros per token by chain id, as the price book reads them: the configured
    price, unless a fresh feed reading was set for the chain (`follow_feed`); back to the
    configured one when the feed cannot be used (`use_configured`)."""

    def __init__(self, configured: Mapping[int, int]) -> None:
        self.configured = dict(configured)
        self._from_feed: dict[int, int] = {}

    def follow_feed(self, chain_id: int, micro_eur: int) -> None:
        self._from_feed[chain_id] = micro_eur

    def use_configured(self, chain_id: int) -> None:
        self._from_feed.pop(chain_id, None)

    def from_feed(self, chain_id: int) -> bool:
        return chain_id in self._from_feed

    def __getitem__(self, chain_id: int) -> int:
        found = self._from_feed.get(chain_id)
        return found if found is not None else self.configured[chain_id]

    def __iter__(self) -> Iterator[int]:
        return iter(self.configured.keys() | self._from_feed.keys())

    def __len__(self) -> int:
        return len(self.configured.keys() | self._from_feed.keys())
