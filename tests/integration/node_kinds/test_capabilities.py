"""The capability probe against each kind of node: what it finds, and the lines it gives
for a start-up log (a node with no state overrides is said to be unable to run the
bundler)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from entryway.chain.capabilities import NodeCapabilities, probe_capabilities
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.devnet.anvil import AnvilProcess
from tests.node_kinds.fixtures import RelayFactory

EVERYTHING = NodeCapabilities(
    state_overrides=True,
    safe_tag=True,
    finalized_tag=True,
    fee_history=True,
    batch_cap=None,
    log_range=None,
)


@pytest.fixture(scope="module", autouse=True)
async def blocks(standalone_anvil: AnvilProcess) -> AsyncIterator[None]:
    async with JsonRpcClient(standalone_anvil.rpc_url) as node:
        await node.request("anvil_mine", ["0x12c"])  # 300 blocks: over the log cap below
    yield


async def probe(url: str) -> NodeCapabilities:
    async with JsonRpcClient(url) as rpc:
        return await probe_capabilities(EthClient(rpc))


@pytest.mark.parametrize("kind", ["anvil", "geth"])
async def test_a_full_node_serves_everything(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory, kind: str
) -> None:
    relay = await node_relays(standalone_anvil.rpc_url, kind)
    found = await probe(relay.url)
    assert found == EVERYTHING
    assert found.simulates
    assert [line.split(": ", 1)[1] for line in found.lines()[:5]] == [
        "yes",
        "yes",
        "yes",
        "yes",
        "yes (20 calls in one taken)",
    ]


async def test_a_hosted_provider_caps_batches_and_log_ranges(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory
) -> None:
    relay = await node_relays(standalone_anvil.rpc_url, "hosted", max_batch=10, max_log_range=50)
    found = await probe(relay.url)
    assert found.state_overrides and found.safe_tag and found.finalized_tag and found.fee_history
    assert found.batch_cap == 10
    assert found.log_range is not None and found.log_range <= 50
    assert "JSON-RPC batches: yes, at most 10 calls a batch" in found.describe()
    assert f"at most {found.log_range} blocks a query" in found.describe()


async def test_a_public_endpoint_missing_tags_history_and_batches(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory
) -> None:
    relay = await node_relays(
        standalone_anvil.rpc_url,
        "public",
        max_batch=0,
        missing_methods={"eth_feeHistory"},
        missing_block_tags={"safe", "finalized"},
    )
    found = await probe(relay.url)
    assert (found.safe_tag, found.finalized_tag, found.fee_history) == (False, False, False)
    assert found.batch_cap == 1
    assert found.state_overrides
    assert "JSON-RPC batches: no: calls are sent one by one (slower)" in found.lines()
    assert '"safe" block tag: no: a confirmation depth stands in for it' in found.lines()


async def test_a_node_without_state_overrides_cannot_run_the_bundler(
    standalone_anvil: AnvilProcess, node_relays: RelayFactory
) -> None:
    relay = await node_relays(standalone_anvil.rpc_url, "public", state_overrides=False)
    found = await probe(relay.url)
    assert not found.state_overrides
    assert not found.simulates
    assert found.lines()[0].startswith("state overrides on eth_call: no: simulations cannot run")
    assert "neither can the bundler" in found.lines()[0]
