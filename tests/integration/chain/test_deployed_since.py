"""Where a contract's logs begin, on the session's devnet: bisection over eth_getCode finds
the block its code first appears at. The devnet's anvil keeps recent states only (like a
full node that is not an archive), so the search starts a few blocks back; a block it cannot
answer for ends the search at its start, the safe side (logs read from there)."""

from __future__ import annotations

from entryway.chain.logs import deployed_since
from entryway.chain.rpc import EthClient
from tests.integration.bundler.rules_setup import deploy
from tests.integration.harness import Harness


async def test_the_first_block_with_code_is_found(harness: Harness, eth: EthClient) -> None:
    before = await eth.block_number()
    contract = await deploy(harness, "TestStorage")
    head = await eth.block_number()
    first = await deployed_since(eth, contract, head, earliest=before)
    assert before < first <= head
    assert await eth.get_code(contract, hex(first))
    assert not await eth.get_code(contract, hex(first - 1))
    assert await deployed_since(eth, Harness.new_key().address, head, earliest=before) == before
