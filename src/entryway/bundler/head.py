"""The chain's head as the bundler judges ops against it, read through a short cache.

A bundler that sends bundles reads the head in its own loop, so the cache is fresh when an op
arrives. A process that only accepts ops (an API replica, whose ops the chain's leader
bundles) would instead pay for the read on the first op of each burst, and every op arriving
while it is under way would wait for it: such a process asks the cache to keep itself fresh
(`now(keep_fresh=True)`) for WARM_FOR_S after each op, reading the head whenever its read is
about to age past what the op may be judged against. Idle, it reads nothing."""

from __future__ import annotations

import asyncio
import contextlib
import time

from entryway.chain.rpc import EthClient, RpcError
from entryway.chain.transport import RpcTransportError

WARM_FOR_S = 3.0  # how long after an op the cache keeps itself fresh (`keep_fresh`)


class ChainHead:
    def __init__(self, eth: EthClient) -> None:
        self.eth = eth
        self._head: tuple[int, int, int] | None = None
        self._read_at = 0.0
        self._lock = asyncio.Lock()
        self.gas_limit = 0  # the latest block's gas limit, as last read
        self._fresh_until = 0.0
        self._refresher: asyncio.Task[None] | None = None

    async def now(
        self, max_age_s: float = 0.0, *, keep_fresh: bool = False
    ) -> tuple[int, int, int]:
        """(latest block number, the time the next block may carry, base fee). With
        `max_age_s`, a head read that recently is reused: ops arriving together share one
        block read (the time still follows the wall clock). With `keep_fresh`, the head is
        read again in the background for WARM_FOR_S, so that the next ops find it read
        within `max_age_s` (see the module's docstring)."""
        if keep_fresh and max_age_s > 0:
            self._fresh_until = time.monotonic() + WARM_FOR_S
            if self._refresher is None or self._refresher.done():
                self._refresher = asyncio.create_task(self._keep_fresh(max_age_s))
        return await self._read(max_age_s)

    async def close(self) -> None:
        """Stop keeping the head fresh."""
        if self._refresher is not None:
            self._refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refresher

    async def _keep_fresh(self, max_age_s: float) -> None:
        ahead = max_age_s * 0.75  # read again before an op would have to
        while time.monotonic() < self._fresh_until:
            await asyncio.sleep(max(ahead - (time.monotonic() - self._read_at), 0.0))
            try:
                await self._read(ahead)
            except (RpcError, RpcTransportError):
                return  # the node is failing: the next op reads it itself, and says so

    async def _read(self, max_age_s: float) -> tuple[int, int, int]:
        if self._head is not None and time.monotonic() - self._read_at <= max_age_s:
            # Recent enough: no waiting for a read under way (the one ahead of time, say).
            number, timestamp, base_fee = self._head
            return number, max(timestamp, int(time.time())), base_fee
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
