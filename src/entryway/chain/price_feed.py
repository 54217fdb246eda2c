"""A chain's native-token price read from a Chainlink-style feed (AggregatorV3Interface:
`decimals()`, `latestRoundData()`), kept in the price book's `NativeTokenPrices`.

Reading on every quote would put a node round trip in front of every priced call: the
price is refreshed in the background instead, every `REFRESH_S`, and quotes read the last
good value. A feed that cannot be read, or whose round is stale, leaves the chain on its
configured price, with one warning when that starts and one when the feed is back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from eth_abi.exceptions import DecodingError

from entryway.chain.rpc import EthClient, RpcError, RpcTransportError
from entryway.contracts.abi import ContractAbi
from entryway.domain.token_prices import (
    FeedRound,
    NativeTokenPrices,
    StaleFeedError,
    micro_eur_of,
)

log = logging.getLogger("entryway.prices")
REFRESH_S = 60.0
READ_TIMEOUT_S = 5.0

AGGREGATOR_V3 = ContractAbi(
    [
        {
            "type": "function",
            "name": "decimals",
            "stateMutability": "view",
            "inputs": [],
            "outputs": [{"name": "", "type": "uint8"}],
        },
        {
            "type": "function",
            "name": "latestRoundData",
            "stateMutability": "view",
            "inputs": [],
            "outputs": [
                {"name": "roundId", "type": "uint80"},
                {"name": "answer", "type": "int256"},
                {"name": "startedAt", "type": "uint256"},
                {"name": "updatedAt", "type": "uint256"},
                {"name": "answeredInRound", "type": "uint80"},
            ],
        },
    ]
)


async def read_round(eth: EthClient, feed: str) -> FeedRound:
    """The feed's latest round; RpcError / RpcTransportError / DecodingError when it cannot
    be read (the node down, no contract there, another interface)."""
    raw_decimals = await eth.call(feed, AGGREGATOR_V3.encode_call("decimals"))
    raw_round = await eth.call(feed, AGGREGATOR_V3.encode_call("latestRoundData"))
    (decimals,) = AGGREGATOR_V3.decode_output("decimals", raw_decimals)
    _round_id, answer, _started, updated_at, _answered = AGGREGATOR_V3.decode_output(
        "latestRoundData", raw_round
    )
    return FeedRound(int(answer), int(decimals), int(updated_at))


@dataclass
class NativePriceFeed:
    """One chain's feed, followed into `prices`."""

    chain_id: int
    eth: EthClient
    feed: str
    max_age_s: int
    prices: NativeTokenPrices
    clock: Callable[[], float] = time.time
    _on_feed: bool | None = field(default=None, init=False)  # None: not read yet

    async def refresh(self) -> bool:
        """Read the feed once; True when the chain's price now follows it, False when the
        configured price stands."""
        try:
            async with asyncio.timeout(READ_TIMEOUT_S):
                round_ = await read_round(self.eth, self.feed)
            price = micro_eur_of(round_, now=int(self.clock()), max_age_s=self.max_age_s)
        except (RpcError, RpcTransportError, TimeoutError, DecodingError, ValueError) as exc:
            # A stale round (StaleFeedError), or no feed there: its answer does not decode.
            self._fall_back(exc)
            return False
        if self._on_feed is not True:
            log.info(
                "chain %d: native token price from the feed at %s: %d micro-EUR",
                self.chain_id,
                self.feed,
                price,
            )
        self.prices.follow_feed(self.chain_id, price)
        self._on_feed = True
        return True

    def _fall_back(self, exc: Exception) -> None:
        if self._on_feed is not False:
            reason = str(exc) if isinstance(exc, StaleFeedError) else f"unreadable ({exc!r})"
            log.warning(
                "chain %d: price feed at %s: %s; using the configured price, %d micro-EUR",
                self.chain_id,
                self.feed,
                reason,
                self.prices.configured.get(self.chain_id, 0),
            )
        self.prices.use_configured(self.chain_id)
        self._on_feed = False

    async def follow(self, interval_s: float = REFRESH_S) -> None:
        """Refresh forever (a background task; cancel to stop)."""
        while True:
            await asyncio.sleep(interval_s)
            await self.refresh()
