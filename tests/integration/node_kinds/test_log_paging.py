"""Log searches on a node that caps them: the pages stay within the cap, found by halving
at each refusal (or set by the client's `max_log_range`), and every log in the range is
found, oldest first; an op's receipt is found far below the head through a hosted
provider's cap. The caps are scaled down (50 blocks where a provider has 2,000), since
anvil mines thousands of blocks slowly; the client's arithmetic is the same."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from entryway.bundler.receipts import USER_OP_EVENT, ReceiptReader
from entryway.chain.logs import contract_logs, deployed_since, logs_between, newest_logs
from entryway.chain.rpc import EthClient, JsonRpcClient, RpcError
from entryway.devnet.anvil import AnvilProcess
from entryway.domain.evm import to_hex
from tests.integration.node_kinds.emitter import EMITTER, emit_user_op_event, mine, place_emitter
from tests.node_kinds.fixtures import STANDALONE_CHAIN_ID, RelayFactory

OLD_OP = bytes.fromhex("01" * 32)
NEW_OP = bytes.fromhex("02" * 32)
NEXT_OP = bytes.fromhex("03" * 32)
CAP = 50  # the relay's log range
LOOKBACK = 1_000  # the receipts' (10,000 by default, over a 2,000-block cap)
QUERY = {"address": EMITTER, "topics": [to_hex(USER_OP_EVENT)]}


@dataclass(frozen=True)
class Emitted:
    old: int  # OLD_OP's block, 500 blocks below NEW_OP's
    new: int
    next: int  # NEXT_OP's, the block after NEW_OP's
    head: int


@pytest.fixture(scope="module")
async def emitted(standalone_anvil: AnvilProcess) -> AsyncIterator[Emitted]:
    async with JsonRpcClient(standalone_anvil.rpc_url, timeout=120) as node:
        await place_emitter(node)
        await mine(node, 100)
        old = await emit_user_op_event(node, OLD_OP)
        await mine(node, 500)
        new = await emit_user_op_event(node, NEW_OP)
        nxt = await emit_user_op_event(node, NEXT_OP)
        await mine(node, 50)
        yield Emitted(old, new, nxt, int(await node.request("eth_blockNumber"), 16))


def op_hashes(logs: list[dict[str, object]]) -> list[str]:
    return [str(log["topics"][1]) for log in logs]  # type: ignore[index]


async def test_every_log_of_a_long_range_is_found_in_pages_within_the_cap(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory, emitted: Emitted
) -> None:
    relay = await node_relays(standalone_anvil.rpc_url, "hosted", max_log_range=CAP)
    async with JsonRpcClient(relay.url) as rpc:
        logs = await logs_between(EthClient(rpc), QUERY, 0, emitted.head)
        assert rpc.log_range.limit is not None and rpc.log_range.limit <= CAP
    assert op_hashes(logs) == [to_hex(OLD_OP), to_hex(NEW_OP), to_hex(NEXT_OP)]
    assert relay.refused["eth_getLogs"] >= 1  # learned from refusals, not told
    pages = relay.forwarded["eth_getLogs"]
    assert pages == -(-(emitted.head + 1) // rpc.log_range.limit)  # no block read twice


async def test_the_learned_cap_is_kept_for_later_queries(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory, emitted: Emitted
) -> None:
    relay = await node_relays(standalone_anvil.rpc_url, "hosted", max_log_range=CAP)
    async with JsonRpcClient(relay.url) as rpc:
        await logs_between(EthClient(rpc), QUERY, 0, emitted.head)
        refusals = relay.refused["eth_getLogs"]
        again = await logs_between(EthClient(rpc), QUERY, 0, emitted.head)
    assert len(again) == 3
    assert relay.refused["eth_getLogs"] == refusals


async def test_a_configured_range_is_never_refused(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory, emitted: Emitted
) -> None:
    relay = await node_relays(standalone_anvil.rpc_url, "public", max_log_range=CAP)
    async with JsonRpcClient(relay.url, max_log_range=CAP // 2) as rpc:
        logs = await logs_between(EthClient(rpc), QUERY, emitted.old, emitted.head)
    assert len(logs) == 3
    assert not relay.refused
    assert relay.forwarded["eth_getLogs"] == -(-(emitted.head - emitted.old + 1) // (CAP // 2))


async def test_a_result_cap_halves_the_range_until_each_page_fits(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory, emitted: Emitted
) -> None:
    relay = await node_relays(standalone_anvil.rpc_url, "hosted", max_log_results=1)
    async with JsonRpcClient(relay.url) as rpc:
        logs = await logs_between(EthClient(rpc), QUERY, emitted.new - 3, emitted.next + 3)
        assert rpc.log_range.limit is not None and rpc.log_range.limit <= 4
    assert op_hashes(logs) == [to_hex(NEW_OP), to_hex(NEXT_OP)]
    assert relay.refused["eth_getLogs"] >= 1


async def test_a_refusal_of_another_kind_is_not_paged(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory, emitted: Emitted
) -> None:
    relay = await node_relays(standalone_anvil.rpc_url, "hosted", missing_methods={"eth_getLogs"})
    async with JsonRpcClient(relay.url) as rpc:
        with pytest.raises(RpcError, match="does not exist"):
            await logs_between(EthClient(rpc), QUERY, 0, emitted.head)
        assert rpc.log_range.limit is None
    assert relay.calls["eth_getLogs"] == 1


async def test_the_newest_page_with_a_log_is_read_first(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory, emitted: Emitted
) -> None:
    relay = await node_relays(standalone_anvil.rpc_url, "hosted")
    async with JsonRpcClient(relay.url, max_log_range=100) as rpc:
        logs = await newest_logs(EthClient(rpc), QUERY, 0, emitted.head)
    assert op_hashes(logs) == [to_hex(NEW_OP), to_hex(NEXT_OP)]
    assert relay.forwarded["eth_getLogs"] == 1  # the 50 blocks above them and theirs


async def test_a_receipt_far_below_the_head_through_a_hosted_cap(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory, emitted: Emitted
) -> None:
    relay = await node_relays(standalone_anvil.rpc_url, "hosted", max_log_range=CAP)
    async with JsonRpcClient(relay.url) as rpc:
        reader = ReceiptReader(EthClient(rpc), EMITTER, STANDALONE_CHAIN_ID, LOOKBACK)
        receipt = await reader.receipt(OLD_OP)
        assert receipt is not None
        assert receipt["userOpHash"] == to_hex(OLD_OP)
        assert int(receipt["receipt"]["blockNumber"], 16) == emitted.old
        assert int(receipt["confirmations"], 16) == emitted.head - emitted.old + 1
        assert await reader.receipt(bytes(32)) is None  # the whole lookback, in pages
        assert (await reader.receipt(NEW_OP) or {}).get("userOpHash") == to_hex(NEW_OP)


async def test_a_cap_met_after_the_first_search_is_learned_in_the_batched_search(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory, emitted: Emitted
) -> None:
    """The head and the logs go in one batch once the head is known, while no cap is: a
    node that then refuses the range is searched in pages from there on."""
    relay = await node_relays(standalone_anvil.rpc_url, "hosted", max_log_range=100_000)
    async with JsonRpcClient(relay.url) as rpc:
        reader = ReceiptReader(EthClient(rpc), EMITTER, STANDALONE_CHAIN_ID, LOOKBACK)
        assert await reader.receipt(NEW_OP) is not None
        relay.limits.max_log_range = CAP
        batches = len(relay.batch_sizes)
        receipt = await reader.receipt(OLD_OP)
        assert receipt is not None and receipt["userOpHash"] == to_hex(OLD_OP)
        assert len(relay.batch_sizes) == batches + 1  # the batched search was tried
        assert rpc.log_range.limit is not None and rpc.log_range.limit <= CAP


async def test_a_contracts_own_logs_are_read_from_its_deployment_within_the_cap(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory, emitted: Emitted
) -> None:
    """An account's guardian events, a paymaster's: read over the contract's life (from its
    deployment, found by bisection where the node keeps old state; here from block 0)."""
    relay = await node_relays(standalone_anvil.rpc_url, "hosted", max_log_range=CAP)
    async with JsonRpcClient(relay.url, max_log_range=CAP) as rpc:
        eth = EthClient(rpc)
        # This anvil keeps no state of old blocks: the search gives up for block 0.
        assert await deployed_since(eth, EMITTER, emitted.head) == 0
        logs = await contract_logs(eth, QUERY)
    assert op_hashes(logs) == [to_hex(OLD_OP), to_hex(NEW_OP), to_hex(NEXT_OP)]
    assert not relay.refused  # every page within the cap
