"""Where a contract's logs begin, on the session's devnet (anvil keeping every block's state):
bisection over eth_getCode finds the block its code first appears at."""

from __future__ import annotations

from entryway.chain.logs import deployed_since
from entryway.chain.rpc import EthClient
from entryway.devnet.devnet import Devnet
from tests.integration.harness import Harness


async def test_the_first_block_with_code_is_found(devnet: Devnet, eth: EthClient) -> None:
    contract = devnet.chains[0].deployment.notary
    head = await eth.block_number()
    first = await deployed_since(eth, contract, head)
    assert first > 0
    assert await eth.get_code(contract, hex(first))
    assert not await eth.get_code(contract, hex(first - 1))
    assert await deployed_since(eth, Harness.new_key().address, head) == 0  # no code at all
