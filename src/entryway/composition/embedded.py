"""The embedded default (`entryway up`): devnets with every contract, turned into settings
and run in the one-process form (`composition.one_process`: the API's services, each chain's
bundler leader and, unless told not to, the task worker), plus a demo project and key."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.chain.transactor import Transactor
from entryway.composition.one_process import running_in_one_process
from entryway.deploy.deployer import ContractDeployer, devnet_price_feed_plan
from entryway.devnet.devnet import Devnet, more_executor_key_files
from entryway.domain.apikeys import InvalidApiKeyError, KeyEnvironment, KeyRole
from entryway.domain.networks import NETWORKS
from entryway.domain.plans import PlanName
from entryway.observability.metrics import ServiceMetrics
from entryway.service.services import Services
from entryway.settings.checks import checked
from entryway.settings.model import ChainSettings, ContractAddresses, Settings
from entryway.storage.store import Store


def devnet_settings(
    base: Settings, devnet: Devnet, price_feeds: Mapping[int, str] | None = None
) -> Settings:
    """`base` serving the devnet's chains: their RPC URLs, deployments, key files and price
    feeds (`devnet_price_feeds`). A chain id no network has is a local test network."""
    feeds = price_feeds or {}
    keys = devnet.dir / "keys"
    chains = [
        ChainSettings(
            **_local_network(chain.chain_id),
            chain_id=chain.chain_id,
            rpc_urls=[chain.rpc_url],  # type: ignore[list-item]  # validated into SecretStr
            executor_key_files=[keys / "bundler-executor.key", *more_executor_key_files(keys)],
            paymaster_signer_key_file=keys / "paymaster-signer.key",
            notary_submitter_key_file=keys / "notary-submitter.key",
            # Every address the devnet deployed (the deployment's fields but its chain id).
            addresses=ContractAddresses(
                **{k: v for k, v in asdict(chain.deployment).items() if k != "chain_id"}
            ),
            price_feed=feeds.get(chain.chain_id),
        )
        for chain in devnet.chains
    ]
    return base.model_copy(update={"chains": chains})


async def devnet_price_feeds(base: Settings, devnet: Devnet) -> dict[int, str]:
    """A price feed of each devnet chain's native token at its configured price (deployed
    once; a new price, a new feed), as a real chain's Chainlink feed would be configured."""
    prices = base.price_book().native_token_micro_eur
    feeds: dict[int, str] = {}
    for chain in devnet.chains:
        if chain.chain_id not in prices:
            continue
        known = NETWORKS.get(chain.chain_id)
        token = known.native_token.symbol if known else "ETH"
        plan = devnet_price_feed_plan(devnet.keys.operator.address, token, prices[chain.chain_id])
        async with JsonRpcClient(chain.rpc_url) as rpc:
            eth = EthClient(rpc)
            transactor = Transactor(eth, devnet.keys.operator, chain.chain_id)
            await ContractDeployer(eth, transactor).ensure(plan)
        feeds[chain.chain_id] = plan.address
    return feeds


def _local_network(chain_id: int) -> dict[str, Any]:
    if chain_id in NETWORKS:
        return {}
    return {
        "name": f"devnet-{chain_id}",
        "native_token": "ETH",
        "testnet": True,
        "explorer_url": "",
    }


@asynccontextmanager
async def run_embedded(
    base: Settings,
    services: Services,
    *,
    devnet_chains: Sequence[int],
    devnet_base_port: int = 8545,
    worker: bool = True,
    metrics: ServiceMetrics | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """Start everything, fill `services`, yield the demo credentials; stop it all after.
    `base` says everything but the chains (database, limits, keys of the service), which
    the devnet gives; `worker`: False leaves durable tasks to `entryway worker` processes;
    `metrics`: the app's registry, where the worker counts its failed deliveries."""
    async with AsyncExitStack() as stack:
        devnet = await stack.enter_async_context(
            Devnet(base.data_dir, list(devnet_chains), base_port=devnet_base_port)
        )
        settings = devnet_settings(base, devnet, await devnet_price_feeds(base, devnet))
        prepared = await checked(settings)
        await stack.enter_async_context(
            running_in_one_process(settings, services, prepared, worker=worker, metrics=metrics)
        )
        yield await _demo_project(services.store, settings.data_dir / "demo.json", services)


async def _demo_project(store: Store, path: Path, services: Services) -> dict[str, Any]:
    """A FREE project on the devnet chains, made once and kept in demo.json: `apiKey` is its
    first key, an admin key (it also creates policies, webhooks and keys); `serviceKey` is
    the key to hand to apps and the SDK, which cannot change the project."""
    saved = _read(path)
    if saved is not None and await _valid(store, saved.get("apiKey")):
        demo: dict[str, Any] = {**saved, "chains": _chains_json(services)}  # ports may move
        if not await _valid(store, saved.get("serviceKey")):
            # A demo.json written before keys had roles: its apiKey became admin.
            project = await store.project(demo["projectId"])
            demo["serviceKey"] = await _service_key(store, project.project_id, project.chains)
        _write(path, demo)
        return demo
    # No demo yet, or a new database: make it (again).
    chains = sorted(services.chains)
    now = datetime.now(UTC)
    owner = await store.create_user(f"demo-{now.timestamp()}@entryway.local", now)
    project_id = await store.create_project(owner, "Demo", PlanName.FREE, chains, now)
    admin = await store.issue_key(project_id, KeyEnvironment.TEST, chains, now, role=KeyRole.ADMIN)
    demo = {
        "apiKey": admin.secret,
        "serviceKey": await _service_key(store, project_id, chains),
        "projectId": project_id,
        "chains": _chains_json(services),
    }
    _write(path, demo)
    return demo


async def _valid(store: Store, key: object) -> bool:
    if not isinstance(key, str):
        return False
    try:
        await store.authenticate(key)
    except InvalidApiKeyError:
        return False
    return True


async def _service_key(store: Store, project_id: str, chains: Iterable[int]) -> str:
    now = datetime.now(UTC)
    key = await store.issue_key(project_id, KeyEnvironment.TEST, list(chains), now)
    return key.secret


def _chains_json(services: Services) -> dict[str, Any]:
    return {str(c.chain_id): c.deployment.as_json(c.rpc_url) for c in services.chains.values()}


# Small local files, read and written once at start-up: blocking I/O is fine here.
def _read(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _write(path: Path, demo: dict[str, Any]) -> None:
    path.write_text(json.dumps(demo, indent=2) + "\n")
    path.chmod(0o600)
