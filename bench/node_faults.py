"""A node that misbehaves: a relay in front of the devnet's JSON-RPC endpoint for the bundler
(`bench.bundler --faults`), and a schedule of faults played on the chain meanwhile.

- **Dropped transactions.** Every DROP_EVERY-th `eth_sendRawTransaction` is answered with the
  transaction's hash, as a node that took it would answer, and never passed on: the bundle is
  lost in the node's pool, as one evicted from a busy mempool is. The bundler must notice that
  it is not mined and send it again.
- **Fee spikes.** Every SPIKE_EVERY_S, the base fee of the next block is raised SPIKE_FACTOR
  times (`anvil_setNextBlockBaseFeePerGas`); the chain's fee market brings it back down over
  the following blocks. A bundle priced for the block before is underpriced for this one.
- **A drained executor.** DRAIN_AT_S into the run, one executor key's balance is set to
  nothing for DRAIN_FOR_S, then funded again (as an operator's top-up would): its sends fail
  meanwhile, and what it held must be bundled once it can pay, or by another key.

Clients are never refused for any of this, and no op is lost: the benchmark counts the ops it
could not send and those never included.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from aiohttp import web

from bench.node_relay import node_relay
from entryway.chain.rpc import EthClient
from entryway.domain.evm import hex_to_bytes, keccak, to_hex

DROP_EVERY = 4
SPIKE_EVERY_S = 8.0
SPIKE_FACTOR = 4
DRAIN_AT_S = 10.0
DRAIN_FOR_S = 6.0
FUNDED_WEI = 1000 * 10**18


@dataclass
class FaultCounts:
    sends: int = 0
    dropped: int = 0
    spikes: int = 0
    drains: int = 0
    dropped_hashes: list[str] = field(default_factory=list)


@asynccontextmanager
async def faulty_node(rpc_url: str, counts: FaultCounts) -> AsyncIterator[str]:
    """The URL of a relay to `rpc_url` that drops every DROP_EVERY-th raw transaction."""

    async def drop(body: bytes) -> web.Response | None:
        """The answer of a node that took the transaction, if this one is dropped. A batch
        is passed on whole: the bundler sends its transactions one at a time."""
        try:
            call = json.loads(body)
        except ValueError:
            return None
        if not isinstance(call, dict) or call.get("method") != "eth_sendRawTransaction":
            return None
        counts.sends += 1
        if counts.sends % DROP_EVERY:
            return None
        counts.dropped += 1
        tx_hash = to_hex(keccak(hex_to_bytes(call["params"][0])))
        counts.dropped_hashes.append(tx_hash)
        return web.json_response({"jsonrpc": "2.0", "id": call.get("id"), "result": tx_hash})

    async with node_relay(rpc_url, drop) as url:
        yield url


async def play_faults(eth: EthClient, executors: Sequence[str], counts: FaultCounts) -> None:
    """Fee spikes every SPIKE_EVERY_S, and one executor drained from DRAIN_AT_S for
    DRAIN_FOR_S; runs until cancelled (the executor is funded again if it is)."""
    drained = executors[0]

    async def drain() -> None:
        await asyncio.sleep(DRAIN_AT_S)
        await eth.rpc.request("anvil_setBalance", [drained, "0x0"])
        counts.drains += 1
        try:
            await asyncio.sleep(DRAIN_FOR_S)
        finally:
            await eth.rpc.request("anvil_setBalance", [drained, hex(FUNDED_WEI)])

    async def spikes() -> None:
        while True:
            await asyncio.sleep(SPIKE_EVERY_S)
            block = await eth.get_block("latest")
            base_fee = int(block["baseFeePerGas"], 16)
            await eth.rpc.request("anvil_setNextBlockBaseFeePerGas", [hex(base_fee * SPIKE_FACTOR)])
            counts.spikes += 1

    await asyncio.gather(drain(), spikes())
