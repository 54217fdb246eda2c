"""The chain registry: the networks Entryway serves, as data.

Adding a network is one `Network(...)` entry in `NETWORKS`; the deploy command checks the
seed's requirements for an additional network against a live RPC endpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from entryway.errors import EntrywayError

GWEI = 10**9


class ChainFamily(StrEnum):
    POLYGON = "polygon"
    BASE = "base"


class Environment(StrEnum):
    MAINNET = "mainnet"
    TESTNET = "testnet"


@dataclass(frozen=True, slots=True)
class FeeRules:
    """Chain-specific gas pricing rules, in wei."""

    min_priority_fee_per_gas: int = 0
    # OP-stack chains charge an L1 data fee on top of L2 execution, quoted by the
    # GasPriceOracle predeploy (`getL1Fee(bytes)`).
    l1_gas_price_oracle: str | None = None
    # The base fee a local devnet of this chain starts at: near the real network's, so that
    # credits spent on the devnet look like production's (None: anvil's 1 gwei).
    devnet_base_fee_per_gas: int | None = None


@dataclass(frozen=True, slots=True)
class NativeToken:
    symbol: str
    name: str
    decimals: int = 18


@dataclass(frozen=True, slots=True)
class Network:
    chain_id: int
    name: str
    family: ChainFamily
    environment: Environment
    native_token: NativeToken
    explorer_url: str
    is_l2: bool
    fee_rules: FeeRules
    block_time_ms: int

    @property
    def is_testnet(self) -> bool:
        return self.environment is Environment.TESTNET

    def explorer_tx_url(self, tx_hash: str) -> str:
        return f"{self.explorer_url}/tx/{tx_hash}"

    def explorer_address_url(self, address: str) -> str:
        return f"{self.explorer_url}/address/{address}"


OP_STACK_GAS_PRICE_ORACLE = "0x420000000000000000000000000000000000000F"

# Polygon PoS nodes reject transactions tipping less than 25 gwei (on mainnet and Amoy alike).
_POLYGON_FEES = FeeRules(min_priority_fee_per_gas=25 * GWEI)
_BASE_FEES = FeeRules(
    l1_gas_price_oracle=OP_STACK_GAS_PRICE_ORACLE, devnet_base_fee_per_gas=5 * GWEI // 1000
)
_POL = NativeToken(symbol="POL", name="Polygon Ecosystem Token")
_ETH = NativeToken(symbol="ETH", name="Ether")

NETWORKS: dict[int, Network] = {
    n.chain_id: n
    for n in (
        Network(
            chain_id=137,
            name="polygon-mainnet",
            family=ChainFamily.POLYGON,
            environment=Environment.MAINNET,
            native_token=_POL,
            explorer_url="https://polygonscan.com",
            is_l2=False,
            fee_rules=_POLYGON_FEES,
            block_time_ms=2000,
        ),
        Network(
            chain_id=80002,
            name="polygon-amoy",
            family=ChainFamily.POLYGON,
            environment=Environment.TESTNET,
            native_token=_POL,
            explorer_url="https://amoy.polygonscan.com",
            is_l2=False,
            fee_rules=_POLYGON_FEES,
            block_time_ms=2000,
        ),
        Network(
            chain_id=8453,
            name="base-mainnet",
            family=ChainFamily.BASE,
            environment=Environment.MAINNET,
            native_token=_ETH,
            explorer_url="https://basescan.org",
            is_l2=True,
            fee_rules=_BASE_FEES,
            block_time_ms=2000,
        ),
        Network(
            chain_id=84532,
            name="base-sepolia",
            family=ChainFamily.BASE,
            environment=Environment.TESTNET,
            native_token=_ETH,
            explorer_url="https://sepolia.basescan.org",
            is_l2=True,
            fee_rules=_BASE_FEES,
            block_time_ms=2000,
        ),
    )
}

DEFAULT_DEVNET_CHAINS: tuple[int, ...] = (80002, 84532)


class UnknownNetworkError(EntrywayError, LookupError):
    def __init__(self, chain_id: int) -> None:
        super().__init__(f"chain id {chain_id} is not a supported network")
        self.chain_id = chain_id


def network(chain_id: int) -> Network:
    try:
        return NETWORKS[chain_id]
    except KeyError:
        raise UnknownNetworkError(chain_id) from None


def by_name(name: str) -> Network:
    for n in NETWORKS.values():
        if n.name == name:
            return n
    raise LookupError(f"no network named {name!r}")
