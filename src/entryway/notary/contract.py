"""Reads of NotaryAnchor that anchoring and verification share."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from eth_abi.exceptions import DecodingError

from entryway import contracts
from entryway.chain.rpc import EthClient, Log, RpcError
from entryway.contracts.abi import ContractAbi
from entryway.domain.evm import checksum, to_hex
from entryway.errors import EntrywayError


class NotaryReadError(EntrywayError):
    """The address did not answer NotaryAnchor's `anchorOf` (reverted or odd data)."""


def notary_abi() -> ContractAbi:
    return contracts.load("NotaryAnchor").abi


@dataclass(frozen=True, slots=True)
class OnChainAnchor:
    """NotaryAnchor's record of a root; a zero timestamp means never anchored."""

    timestamp: int
    block_number: int
    leaf_count: int

    @property
    def anchored(self) -> bool:
        return self.timestamp != 0


async def anchor_of(eth: EthClient, notary: str, root: bytes) -> OnChainAnchor:
    abi = notary_abi()
    try:
        raw = await eth.call(notary, abi.encode_call("anchorOf", root))
        ((timestamp, block_number, leaf_count),) = abi.decode_output("anchorOf", raw)
    except (RpcError, DecodingError) as exc:
        raise NotaryReadError(f"{notary} did not answer anchorOf: {exc}") from exc
    return OnChainAnchor(int(timestamp), int(block_number), int(leaf_count))


def anchored_event(logs: Iterable[Log], notary: str, root: bytes) -> dict[str, Any] | None:
    """The decoded `Anchored` event for `root` emitted by `notary` among `logs`, if any."""
    abi = notary_abi()
    topic = abi.event_topic("Anchored")
    for log in logs:
        if log.address != checksum(notary) or log.topics[:2] != (topic, root):
            continue
        return abi.decode_event("Anchored", log.topics, log.data)
    return None


async def anchored_logs(eth: EthClient, notary: str, root: bytes, block_number: int) -> list[Log]:
    """The `Anchored` logs for `root` in block `block_number` (there is at most one)."""
    topic = notary_abi().event_topic("Anchored")
    block = hex(block_number)
    query = {"address": notary, "topics": [to_hex(topic), to_hex(root)]}
    raw = await eth.rpc.request("eth_getLogs", [{**query, "fromBlock": block, "toBlock": block}])
    return [Log.from_rpc(entry) for entry in raw]
