"""The chain's head as the bundler judges ops against it, read through a short cache."""

from __future__ import annotations

import asyncio
import time

from entryway.chain.rpc import EthClient


class ChainHead:
    def __init__(self, eth: EthClient) -> None:
        self.eth = eth
        self._head: tuple[int, int, int] | None = None
        self._read_at = 0.0
        self._lock = asyncio.Lock()
        self.gas_limit = 0  # the latest block's gas limit, as last read

    async def now(self, max_age_s: float = 0.0) -> tuple[int, int, int]:
        """(latest block number, the time the next block may carry, base fee). With
        `max_age_s`, a head read that recently is reused: ops arriving together share one
        block read (the time still follows the wall clock)."""
        async with self._lock:
            if self._head is None or time.monotonic() - self._read_at > max_age_s:
                block = await self.eth.get_block("latest")
                self._read_at = time.monotonic()
                self.gas_limit = int(block["gasLimit"], 16)
                self._head = (
                    int(block["number"], 16),
                    int(block["timestamp"], 16),
                    int(block.get("baseFeePerGas", "0x0"), 16),
                )
            number, timestamp, base_fee = self._head
        return number, max(timestamp, int(time.time())), base_fee
