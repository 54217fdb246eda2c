"""JSON-RPC batches on a node that caps them: split into batches within the cap, the cap
learned from a refusal (down to no batches at all), and a batch carrying a write never
sent twice."""

from __future__ import annotations

import pytest

from entryway.chain.rpc import JsonRpcClient, RpcError
from entryway.devnet.anvil import AnvilProcess
from tests.node_kinds.fixtures import STANDALONE_CHAIN_ID, RelayFactory

READS = [("eth_chainId", [])] * 8


async def test_a_refused_batch_is_split_and_the_cap_kept(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory
) -> None:
    relay = await node_relays(standalone_anvil.rpc_url, "hosted", max_batch=3)
    async with JsonRpcClient(relay.url) as rpc:
        assert await rpc.batch(READS) == [hex(STANDALONE_CHAIN_ID)] * 8
        assert rpc.batch_cap.limit == 3  # the provider's own number, from its message
        assert relay.batch_sizes == [8, 3, 3, 2]
        assert await rpc.batch(READS[:5]) == [hex(STANDALONE_CHAIN_ID)] * 5
    assert relay.batch_sizes[4:] == [3, 2]
    assert relay.forwarded == {"eth_chainId": 13}


async def test_a_refusal_answered_call_by_call_is_learned_too(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory
) -> None:
    relay = await node_relays(standalone_anvil.rpc_url, "hosted", max_batch=3, batch_refusal="each")
    async with JsonRpcClient(relay.url) as rpc:
        outcomes = await rpc.batch_outcomes(READS)
    assert outcomes == [hex(STANDALONE_CHAIN_ID)] * 8
    assert max(relay.batch_sizes[1:]) <= 3


async def test_a_node_without_batches_gets_calls_one_by_one(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory
) -> None:
    relay = await node_relays(standalone_anvil.rpc_url, "public", max_batch=0)
    async with JsonRpcClient(relay.url) as rpc:
        code = await rpc.batch_outcomes(
            [("eth_chainId", []), ("eth_getCode", ["0x" + "00" * 20, "latest"])]
        )
        assert code == [hex(STANDALONE_CHAIN_ID), "0x"]
        assert rpc.batch_cap.limit == 1
        refused = len(relay.batch_sizes)
        await rpc.batch(READS)
    assert len(relay.batch_sizes) == refused  # no batch tried once none is taken
    assert relay.forwarded == {"eth_chainId": 9, "eth_getCode": 1}


async def test_a_configured_cap_is_never_refused(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory
) -> None:
    relay = await node_relays(standalone_anvil.rpc_url, "hosted", max_batch=3)
    async with JsonRpcClient(relay.url, max_batch=2) as rpc:
        await rpc.batch(READS)
    assert relay.batch_sizes == [2, 2, 2, 2]
    assert not relay.refused


async def test_a_refused_batch_with_a_write_is_not_sent_again(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory
) -> None:
    relay = await node_relays(standalone_anvil.rpc_url, "hosted", max_batch=1)
    async with JsonRpcClient(relay.url) as rpc:
        with pytest.raises(RpcError, match="batch size too large"):
            await rpc.batch([("eth_chainId", []), ("eth_sendRawTransaction", ["0x02ab"])])
        assert rpc.batch_cap.limit is None
    assert relay.batch_sizes == [2]
    assert not relay.writes
