"""What a project's first page gives to get going: each enabled chain's RPC URL with the key
placeholder, the EntryPoints and paymaster served there, a Python SDK snippet and a
viem/permissionless one to copy, and the project's last ops (linked to their pages)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from fastapi import Request

from entryway.dashboard import web
from entryway.domain.networks import NETWORKS
from entryway.service.op_report import is_local
from entryway.service.services import Services
from entryway.storage.project_activity import ProjectActivity, SentOp

KEY_PLACEHOLDER = "YOUR_API_KEY"
NODE_PLACEHOLDER = "YOUR_NODE_RPC_URL"
LAST_OPS = 5


@dataclass(frozen=True, slots=True)
class ChainStart:
    chain_id: int
    name: str
    rpc_url: str  # this service's bundler/paymaster endpoint, the key as a placeholder
    entry_points: tuple[tuple[str, str], ...]  # (release, address)
    paymasters: tuple[tuple[str, str], ...]  # (release, address)
    node_url: str  # what the SDK reads the chain through: a devnet's node, else a placeholder
    served: bool  # False: the project enabled it, this service does not run it


def _served(services: Services, base: str, chain_id: int) -> ChainStart:
    network = NETWORKS.get(chain_id)
    name = network.title if network else f"chain {chain_id}"
    rpc_url = f"{base}/rpc/{chain_id}?apikey={KEY_PLACEHOLDER}"
    chain = services.chains.get(chain_id)
    if chain is None:
        return ChainStart(chain_id, name, rpc_url, (), (), NODE_PLACEHOLDER, False)
    d = chain.deployment
    entry_points = [("v0.8", d.entry_point)]
    paymasters = [("v0.8", d.paymaster)]
    if d.entry_point_v07:
        entry_points.append(("v0.7", d.entry_point_v07))
    if d.paymaster_v07:
        paymasters.append(("v0.7", d.paymaster_v07))
    # A node on this machine (a devnet) is named; an operator's own node URL, which may
    # carry its provider's key, never is.
    node = chain.rpc_url if is_local(chain) and chain.rpc_url else NODE_PLACEHOLDER
    return ChainStart(chain_id, name, rpc_url, tuple(entry_points), tuple(paymasters), node, True)


def sdk_snippet(base: str, chain: ChainStart) -> str:
    """Python: a new smart account's first op, sponsored (a policy must allow it)."""
    return f'''import asyncio

from entryway_sdk import Entryway
from eth_account import Account


async def main() -> None:
    client = await Entryway.init(
        api_key="{KEY_PLACEHOLDER}",
        rpc_url="{chain.node_url}",
        chain_id={chain.chain_id},
        base_url="{base}",
    )
    async with client:
        wallet = await client.wallet(Account.create())  # keep the owner key to use it again
        op = await wallet.send({{"to": wallet.address, "value": 0}})
        receipt = await op.wait(timeout=120)
        print(op.user_op_hash, "succeeded" if receipt.success else "failed")


asyncio.run(main())
'''


def viem_snippet(chain: ChainStart) -> str:
    """TypeScript: the same with viem and permissionless, through this service's endpoint."""
    entry_point = dict(chain.entry_points).get("v0.7", "")
    return f"""import {{ createPublicClient, http }} from "viem";
import {{ generatePrivateKey, privateKeyToAccount }} from "viem/accounts";
import {{ createSmartAccountClient }} from "permissionless";
import {{ toSimpleSmartAccount }} from "permissionless/accounts";
import {{ createPaymasterClient }} from "viem/account-abstraction";

const url = "{chain.rpc_url}";
const client = createPublicClient({{ transport: http("{chain.node_url}") }});
const account = await toSimpleSmartAccount({{
  client,
  owner: privateKeyToAccount(generatePrivateKey()),
  entryPoint: {{ address: "{entry_point}", version: "0.7" }},
}});
const smartAccount = createSmartAccountClient({{
  account,
  bundlerTransport: http(url),
  paymaster: createPaymasterClient({{ transport: http(url) }}),
}});
const hash = await smartAccount.sendTransaction({{ to: account.address, value: 0n }});
console.log(hash);
"""


@dataclass(frozen=True, slots=True)
class Home:
    chains: list[ChainStart]
    sdk: str  # for the first served chain ("" when none is)
    viem: str
    last_ops: list[SentOp]


async def home(
    request: Request, services: Services, project_id: str, chains: Iterable[int]
) -> Home:
    # `http.public_url` (or the address served on), never the Host header a client chose.
    base = web.options(request).public_url.rstrip("/")
    starts = [_served(services, base, c) for c in sorted(chains)]
    first = next((c for c in starts if c.served), None)
    ops = await ProjectActivity(services.store.engine).user_operations(project_id, limit=LAST_OPS)
    return Home(
        starts,
        sdk_snippet(base, first) if first else "",
        viem_snippet(first) if first else "",
        ops,
    )
