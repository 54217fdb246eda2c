"""What a worker process needs to run chain tasks (notary anchoring) on its own: each chain's
RPC and NotaryAnchor, and the notary key. Read from the data directory `entryway up` writes
(`demo.json` for the chains, `devnet/keys/notary-submitter.key`), or from a key file given
explicitly. Recovery tasks submit UserOperations through the service's durable intake (the
bundler seam `build_services` gives), so only a worker built from the settings runs them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.chain.transactor import Transactor
from entryway.errors import ConfigurationError
from entryway.keys import load_key_file
from entryway.notary.anchor import Anchorer
from entryway.notary.anchoring import notary_handlers
from entryway.storage.notary import NotaryStore
from entryway.storage.webhooks import WebhookStore
from entryway.worker.worker import Handler


@asynccontextmanager
async def notary_handlers_from(
    engine: AsyncEngine, data_dir: Path, key_file: Path | None = None
) -> AsyncIterator[dict[str, Handler]]:
    """The anchoring handlers for every chain in `data_dir`'s demo.json, their RPC clients
    open for the duration of the block."""
    try:
        chains = json.loads((data_dir / "demo.json").read_text())["chains"]
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigurationError(f"no chains in {data_dir / 'demo.json'}: {exc}") from None
    key = load_key_file(key_file or data_dir / "devnet" / "keys" / "notary-submitter.key")
    async with AsyncExitStack() as stack:
        anchorers = {}
        for chain_id, chain in chains.items():
            rpc = await stack.enter_async_context(JsonRpcClient(chain["rpcUrl"]))
            eth = EthClient(rpc)
            anchorers[int(chain_id)] = Anchorer(
                Transactor(eth, key, int(chain_id)), chain["notary"]
            )
        yield dict(notary_handlers(NotaryStore(engine), anchorers, WebhookStore(engine)))
