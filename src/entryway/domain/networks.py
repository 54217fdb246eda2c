"""The chain registry: the networks Entryway serves, as data.

Adding a network is one `Network(...)` entry in `NETWORKS`; the deploy command checks the
requirements for an additional network (docs/requirements.md §1.2) against a live RPC endpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from entryway.errors import EntrywayError

GWEI = 10**9
# A chain's fee ceiling is this many times a generous gas price for it: far above anything
# the chain has charged, low enough that an op's most expensive cost stays a sum the credit
# ledger can hold.
FEE_CEILING_MULTIPLE = 10
# Each gas limit of an op stays within a whole 30M-gas block (a 3-byte placeholder that
# prices preVerificationGas while a client estimates fits); an op ready to be sent or
# sponsored, all its limits summed, within half of one.
MAX_GAS_LIMIT = 30_000_000
MAX_USER_OPERATION_GAS = 15_000_000


def fee_ceiling(generous_gas_price: int) -> int:
    return FEE_CEILING_MULTIPLE * generous_gas_price


class ChainFamily(StrEnum):
    POLYGON = "polygon"
    BASE = "base"
    OTHER = "other"  # a network an operator added by configuration


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
    # Sanity bounds, checked wherever an op enters (the bundler's eth_sendUserOperation and
    # eth_estimateUserOperationGas, the paymaster's pm_ methods): an op asking more is refused
    # with -32602. Without a network entry (a local chain) these defaults apply.
    max_fee_per_gas: int = fee_ceiling(10_000 * GWEI)
    max_gas_limit: int = MAX_GAS_LIMIT
    max_user_operation_gas: int = MAX_USER_OPERATION_GAS


@dataclass(frozen=True, slots=True)
class NativeToken:
    symbol: str
    name: str
    decimals: int = 18


@dataclass(frozen=True, slots=True)
class PublicRpc:
    """A public JSON-RPC endpoint a network's own team runs, free and keyless, as its team
    publishes it. Entryway never calls these by itself: they are suggestions for the
    `rpc_urls` of a chain (docs/deploy.md, "RPC providers")."""

    url: str
    operator: str  # who runs it
    limits: str  # what the operator publishes about its limits


# What a node provider must offer for Entryway's bundler and paymaster on a chain (asked of
# every request for an additional network).
PROVIDER_REQUIREMENTS: tuple[tuple[str, str], ...] = (
    (
        "eth_call with state overrides",
        "the bundler simulates each UserOperation's validation with the EntryPoint's "
        "simulation code in place",
    ),
    (
        "debug_traceCall",
        "with geth's erc7562Tracer or the struct logger for every ERC-7562 rule, or with "
        "callTracer and prestateTracer for those rules their output shows (without it, the "
        "bundler enforces the EntryPoint's own checks only)",
    ),
    (
        "eth_feeHistory",
        "wallets and standard ERC-4337 clients (viem, permissionless) estimate EIP-1559 fees "
        "from the recent blocks' base fees and tips",
    ),
)

_PUBLIC_LIMITS = (
    "rate-limited and shared, with no uptime commitment: for development and light use, "
    "not production traffic; debug_traceCall not promised"
)


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
    public_rpcs: tuple[PublicRpc, ...] = ()  # the network team's own public endpoints

    @property
    def is_testnet(self) -> bool:
        return self.environment is Environment.TESTNET

    @property
    def title(self) -> str:
        """The name shown to people: "Polygon Amoy" for `polygon-amoy`."""
        return " ".join(word.capitalize() for word in self.name.split("-"))

    def explorer_tx_url(self, tx_hash: str) -> str:
        return f"{self.explorer_url}/tx/{tx_hash}"

    def explorer_address_url(self, address: str) -> str:
        return f"{self.explorer_url}/address/{address}"


OP_STACK_GAS_PRICE_ORACLE = "0x420000000000000000000000000000000000000F"

# Polygon PoS nodes reject transactions tipping less than 25 gwei (on mainnet and Amoy alike).
# Fee ceilings: Polygon PoS has spiked to a few thousand gwei; Base rarely passes 1 gwei.
_POLYGON_FEES = FeeRules(
    min_priority_fee_per_gas=25 * GWEI, max_fee_per_gas=fee_ceiling(5_000 * GWEI)
)
_BASE_FEES = FeeRules(
    l1_gas_price_oracle=OP_STACK_GAS_PRICE_ORACLE,
    devnet_base_fee_per_gas=5 * GWEI // 1000,
    max_fee_per_gas=fee_ceiling(100 * GWEI),
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
            public_rpcs=(PublicRpc("https://polygon-rpc.com", "Polygon Labs", _PUBLIC_LIMITS),),
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
            public_rpcs=(
                PublicRpc("https://rpc-amoy.polygon.technology", "Polygon Labs", _PUBLIC_LIMITS),
            ),
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
            public_rpcs=(PublicRpc("https://mainnet.base.org", "Base (Coinbase)", _PUBLIC_LIMITS),),
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
            public_rpcs=(PublicRpc("https://sepolia.base.org", "Base (Coinbase)", _PUBLIC_LIMITS),),
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


def fee_rules_for(chain_id: int) -> FeeRules:
    """The chain's fee rules; the defaults for a chain this registry does not list (a local
    devnet under its own chain id, a network served by the standalone bundler)."""
    known = NETWORKS.get(chain_id)
    return known.fee_rules if known is not None else FeeRules()
