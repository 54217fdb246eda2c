"""HTTP 429 from a provider: reads wait the Retry-After it names, within their deadline;
a write refused by the limit is sent again after the wait and lands exactly once."""

from __future__ import annotations

import time

import pytest
from eth_account import Account

from entryway.chain.retry import RetryPolicy
from entryway.chain.rpc import EthClient, JsonRpcClient, RpcTransportError
from entryway.chain.transport import NODE_RATE_LIMITED
from entryway.devnet.anvil import AnvilProcess
from entryway.domain.evm import to_hex
from tests.node_kinds.fixtures import STANDALONE_CHAIN_ID, RelayFactory

# Backoff far below the one second the relay asks for: a retry after a second or more is
# the Retry-After honoured, not the policy's own backoff.
QUICK = RetryPolicy(attempts=3, backoff_base_s=0.01, backoff_cap_s=0.02)


async def test_a_read_waits_the_retry_after_it_is_given(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory
) -> None:
    relay = await node_relays(standalone_anvil.rpc_url, "hosted", retry_after_s=1)
    async with JsonRpcClient(relay.url, retry=QUICK) as rpc:
        relay.limits.throttle_next = 1
        started = time.monotonic()
        assert await EthClient(rpc).chain_id() == STANDALONE_CHAIN_ID
        assert time.monotonic() - started >= 1.0
    assert relay.throttled == {"eth_chainId": 1}
    assert relay.forwarded == {"eth_chainId": 1}


async def test_a_wait_past_the_deadline_fails_at_once_as_rate_limited(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory
) -> None:
    relay = await node_relays(standalone_anvil.rpc_url, "hosted", retry_after_s=30)
    async with JsonRpcClient(relay.url, retry=QUICK, timeout=2.0) as rpc:
        relay.limits.throttle_next = 1
        started = time.monotonic()
        with pytest.raises(RpcTransportError) as raised:
            await EthClient(rpc).block_number()
        assert time.monotonic() - started < 1.0
    assert str(raised.value) == NODE_RATE_LIMITED
    assert relay.throttled == {"eth_blockNumber": 1}
    assert not relay.forwarded


async def test_a_burst_over_the_limit_is_all_answered(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory
) -> None:
    relay = await node_relays(standalone_anvil.rpc_url, "hosted")
    relay.throttle(burst=3, per_s=5.0, retry_after_s=1)
    async with JsonRpcClient(relay.url, retry=QUICK) as rpc:
        eth = EthClient(rpc)
        numbers = [await eth.block_number() for _ in range(6)]
    assert len(set(numbers)) == 1
    assert sum(relay.throttled.values()) >= 1
    assert relay.forwarded == {"eth_blockNumber": 6}


async def test_a_write_refused_by_the_rate_limit_lands_exactly_once(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory
) -> None:
    relay = await node_relays(standalone_anvil.rpc_url, "hosted", retry_after_s=1)
    key = Account.create()
    async with JsonRpcClient(standalone_anvil.rpc_url) as node:
        await node.request("anvil_setBalance", [key.address, hex(10**18)])
    async with JsonRpcClient(relay.url, retry=QUICK) as rpc:
        eth = EthClient(rpc)
        base_fee = int((await eth.get_block("latest"))["baseFeePerGas"], 16)
        tx = {
            "type": 2,
            "chainId": STANDALONE_CHAIN_ID,
            "nonce": 0,
            "to": "0x" + "77" * 20,
            "value": 1,
            "gas": 21_000,
            "maxFeePerGas": 2 * base_fee + 10**9,
            "maxPriorityFeePerGas": 10**9,
        }
        raw = bytes(key.sign_transaction(tx).raw_transaction)
        relay.limits.throttle_next = 1
        started = time.monotonic()
        tx_hash = await eth.send_raw_transaction(raw)
        assert time.monotonic() - started >= 1.0
        receipt = await eth.wait_for_receipt(tx_hash, within_s=10)
        assert receipt.succeeded
        assert await eth.get_nonce(key.address, "latest") == 1
    assert relay.throttled["eth_sendRawTransaction"] == 1
    assert relay.writes == [to_hex(raw)]
