"""What a new bundler leader reads on the chain before it touches the ops it inherited.

A leader that dies may leave bundles behind: sent from its executor keys (which the new
leader holds too: one leader per chain and executor key set), not yet mined when it died.
Validated again while such a bundle is pending, its ops would fail against the node's pending
state (the account already deployed, the nonce already taken) and be written off as dropped,
only to be mined a block later. So the new leader first waits until the nonces its executors
had sent up to at takeover are mined (`PreviousBundles`), and then looks each inherited op's
UserOperationEvent up over a bounded range of blocks (`mined_op`): found, the op is recorded
as mined, with its bundle's transaction.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from entryway import contracts
from entryway.chain.logs import newest_logs
from entryway.chain.rpc import EthClient
from entryway.domain.evm import hex_to_bytes, to_hex

log = logging.getLogger("entryway.bundler.leader")
EP = contracts.load("EntryPoint").abi
USER_OP_EVENT = EP.event_topic("UserOperationEvent")
# An op cannot be mined before the block its validation read; a few blocks earlier still, in
# case the API's node was ahead of this one or a shallow reorg moved the head back.
BEFORE_VALIDATION_BLOCKS = 16
# How long inherited ops wait for the previous leader's bundles to be mined. A bundle stuck
# longer (underpriced, say) is left to the chain: the ops are validated again then, and one
# that the stuck bundle mines later is still recognised at write-back (`IntakeLeader`).
PREVIOUS_BUNDLES_WAIT_S = 120.0


@dataclass(frozen=True, slots=True)
class MinedOp:
    """An op's UserOperationEvent, as found on the chain."""

    user_op_hash: str
    tx_hash: str
    block: int
    success: bool


async def mined_op(
    eth: EthClient,
    entry_point: str,
    user_op_hash: str,
    *,
    validated_block: int | None,
    lookback_blocks: int,
) -> MinedOp | None:
    """The op's UserOperationEvent at `entry_point`, looked for from a little before the block
    its validation read (else `lookback_blocks` back from the head) over at most
    `lookback_blocks` blocks: a range a node's eth_getLogs answers, wherever the op is."""
    head = await eth.block_number()
    if validated_block is None:
        start = max(head - lookback_blocks, 0)
    else:
        start = max(min(validated_block, head) - BEFORE_VALIDATION_BLOCKS, 0)
    end = min(head, start + lookback_blocks)
    query = {"address": entry_point, "topics": [to_hex(USER_OP_EVENT), user_op_hash.lower()]}
    logs = await newest_logs(eth, query, start, end)
    if not logs:
        return None
    found: dict[str, Any] = logs[-1]
    event = EP.decode_event(
        "UserOperationEvent",
        [hex_to_bytes(t) for t in found["topics"]],
        hex_to_bytes(found["data"]),
    )
    return MinedOp(
        user_op_hash.lower(),
        str(found["transactionHash"]),
        int(str(found["blockNumber"]), 16),
        bool(event["success"]),
    )


class PreviousBundles:
    """Whether the bundles the executors had sent when this leader took over are mined: each
    executor's mined nonce has reached the pending nonce read at takeover (`start`, before
    this leader sends anything). Gives up waiting after `wait_s`."""

    def __init__(
        self,
        eth: EthClient,
        executors: Sequence[str],
        *,
        wait_s: float = PREVIOUS_BUNDLES_WAIT_S,
    ) -> None:
        self.eth = eth
        self.executors = list(executors)
        self.wait_s = wait_s
        self._sent: dict[str, int] | None = None  # executor -> pending nonce at takeover
        self._since = 0.0
        self._settled = False
        self._told = False  # the wait logged once

    async def start(self) -> None:
        """Read what the executors had sent; once, before this leader bundles."""
        if self._sent is not None:
            return
        nonces = await asyncio.gather(*(self.eth.get_nonce(a, "pending") for a in self.executors))
        self._sent = dict(zip(self.executors, nonces, strict=True))
        self._since = time.monotonic()

    async def settled(self) -> bool:
        if self._settled:
            return True
        await self.start()
        assert self._sent is not None
        mined = await asyncio.gather(*(self.eth.get_nonce(a, "latest") for a in self.executors))
        behind = {
            a: (sent - m)
            for (a, sent), m in zip(self._sent.items(), mined, strict=True)
            if m < sent
        }
        if not behind:
            self._settled = True
            return True
        if time.monotonic() - self._since > self.wait_s:
            log.warning(
                "the previous leader's bundles are still not mined after %.0f s (%s); "
                "validating its ops again",
                self.wait_s,
                ", ".join(f"{a}: {n} pending" for a, n in behind.items()),
            )
            self._settled = True
            return True
        if not self._told:
            self._told = True
            log.info(
                "waiting for the previous leader's bundles to be mined before loading its ops (%s)",
                ", ".join(f"{a}: {n} pending" for a, n in behind.items()),
            )
        return False
