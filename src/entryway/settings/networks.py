"""The configured chains as the network registry every part of the service consults.

The four supported networks come with their defaults (domain/networks.py); a chain's
settings may override their fee rules, and an operator adds any other EVM chain with one
`[[chains]]` table. `register_networks` runs once per process, in the composition root,
before anything reads the registry, so the bundler, the node client's transactions, the
sanity bounds and the SDK defaults all see the same rules.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from entryway.domain.networks import (
    NETWORKS,
    ChainFamily,
    Environment,
    NativeToken,
    Network,
)
from entryway.settings.model import ChainSettings

DEFAULT_BLOCK_TIME_MS = 2_000


def network_of(chain: ChainSettings) -> Network:
    rules = chain.fee_rules_resolved
    known = NETWORKS.get(chain.chain_id)
    if known is not None:
        return replace(known, fee_rules=rules)
    assert chain.name is not None and chain.native_token is not None  # the model checks
    return Network(
        chain_id=chain.chain_id,
        name=chain.name,
        family=ChainFamily.OTHER,
        environment=Environment.TESTNET if chain.testnet else Environment.MAINNET,
        native_token=NativeToken(symbol=chain.native_token, name=chain.native_token),
        explorer_url=(chain.explorer_url or "").rstrip("/"),
        is_l2=rules.l1_gas_price_oracle is not None,
        fee_rules=rules,
        block_time_ms=DEFAULT_BLOCK_TIME_MS,
    )


def register_networks(chains: Iterable[ChainSettings]) -> None:
    for chain in chains:
        NETWORKS[chain.chain_id] = network_of(chain)
