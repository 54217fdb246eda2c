"""`eth_getLogs` over any block range, in pages the node answers.

One query over a long range is what anvil and a full node take; a hosted provider refuses
it (`chain.limits`). Every log query of the node client goes through here: pages of at
most the client's `log_range`, each one halved and sent again when the node refuses it,
until the range is covered. Nothing is read twice and nothing skipped: a page refused is
sent again in two halves from the same first block.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from entryway.chain.limits import is_range_refusal
from entryway.chain.rpc import EthClient, RpcError

Query = Mapping[str, Any]  # an eth_getLogs filter: address and topics (its blocks are ours)


async def logs_between(eth: EthClient, query: Query, first: int, last: int) -> list[dict[str, Any]]:
    """Every log matching `query` in blocks `first` to `last` (both included), oldest first."""
    found: list[dict[str, Any]] = []
    while first <= last:
        size = eth.rpc.log_range.size(last - first + 1)
        page = await _page(eth, query, first, first + size - 1)
        if page is None:
            continue  # refused: the range was lowered
        found += page
        first += size
    return found


async def newest_logs(eth: EthClient, query: Query, first: int, last: int) -> list[dict[str, Any]]:
    """The logs matching `query` in the newest page of blocks `first` to `last` that has any,
    oldest first; reading pages back from `last`, so a recent log costs one query however
    long the range. [] when no block in the range has one."""
    while first <= last:
        size = eth.rpc.log_range.size(last - first + 1)
        page = await _page(eth, query, last - size + 1, last)
        if page is None:
            continue
        if page:
            return page
        last -= size
    return []


async def _page(eth: EthClient, query: Query, first: int, last: int) -> list[dict[str, Any]] | None:
    """One query's logs; None when the node refused it for its size (the client's range is
    then lowered). A page of one block refused raises: there is nothing left to split."""
    window = {**query, "fromBlock": hex(first), "toBlock": hex(last)}
    try:
        logs: list[dict[str, Any]] = await eth.rpc.request("eth_getLogs", [window])
    except RpcError as error:
        blocks = last - first + 1
        if blocks == 1 or not is_range_refusal(error.message):
            raise
        eth.rpc.log_range.refused(blocks, error.message)
        return None
    return logs


async def deployed_since(eth: EthClient, address: str, head: int, earliest: int = 0) -> int:
    """The first block at which `address` has code, found by bisection over `eth_getCode`
    (about log2(head) reads): where a contract's own logs begin, so that reading them all
    costs pages over its life, not over the chain's; searched from `earliest` on. `earliest`
    when the node cannot answer for an old block (a node that keeps recent state only) or
    the address has no code at `head`."""
    low, high = earliest, head
    try:
        if not await eth.get_code(address, hex(head)):
            return earliest
        while low < high:
            middle = (low + high) // 2
            if await eth.get_code(address, hex(middle)):
                high = middle
            else:
                low = middle + 1
    except RpcError:
        return earliest
    return low


async def contract_logs(eth: EthClient, query: Query) -> list[dict[str, Any]]:
    """Every log of the contract `query["address"]` names, from its deployment to the head,
    in pages the node answers."""
    head = await eth.block_number()
    capped = eth.rpc.log_range.size(head + 1) <= head  # no cap met: one query from block 0
    first = await deployed_since(eth, str(query["address"]), head) if capped else 0
    return await logs_between(eth, query, first, head)
