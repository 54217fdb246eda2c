"""The notarization API as the benchmark serves it: one uvicorn process on a real database,
the notary routes, the batcher and a worker anchoring through NotaryAnchor on a running
devnet, as `entryway up` runs them. Run by bench/notary_api.py, not by hand."""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import uvicorn
from fastapi import FastAPI

from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.chain.transactor import Transactor
from entryway.domain.notarization import NotarySettings
from entryway.keys import load_key_file
from entryway.notary.anchor import Anchorer
from entryway.notary.anchoring import notary_handlers
from entryway.notary.batcher import running_batcher
from entryway.notary.service import Notary
from entryway.service.app import create_app
from entryway.service.ratelimit import RateLimiter, parse_limits
from entryway.service.routes_notary import notary_routes
from entryway.service.services import Services
from entryway.storage.engine import make_engine, migrate
from entryway.storage.notary import NotaryStore
from entryway.storage.store import Store
from entryway.storage.webhooks import WebhookStore
from entryway.worker import running_worker


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--rpc-url", required=True)
    parser.add_argument("--chain-id", type=int, required=True)
    parser.add_argument("--notary", required=True, help="NotaryAnchor's address")
    parser.add_argument("--notary-key-file", required=True, type=Path)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--settings", default="{}", help="NotarySettings fields as JSON")
    args = parser.parse_args()
    services = Services()
    settings = NotarySettings(**json.loads(args.settings))

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            engine = make_engine(args.database_url)
            stack.push_async_callback(engine.dispose)
            await migrate(engine)
            store = Store(engine)
            limiter = RateLimiter(parse_limits("FREE=1000000/second"))
            platform = services.attach(store, limiter=limiter)
            await platform.meter.start()
            stack.push_async_callback(platform.meter.stop)
            notaries = NotaryStore(engine)
            services.notary = Notary(notaries, [args.chain_id], settings)  # type: ignore[attr-defined]
            rpc = await stack.enter_async_context(JsonRpcClient(args.rpc_url))
            key = load_key_file(args.notary_key_file)
            anchorer = Anchorer(Transactor(EthClient(rpc), key, args.chain_id), args.notary)
            handlers = notary_handlers(notaries, {args.chain_id: anchorer}, WebhookStore(engine))
            await stack.enter_async_context(running_worker(engine, usage=store, handlers=handlers))
            await stack.enter_async_context(running_batcher(notaries, [args.chain_id], settings))
            yield

    app = create_app(services, lifespan)
    app.include_router(notary_routes())
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
