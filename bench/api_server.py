"""The API as the benchmark serves it: one uvicorn process, a real database, one chain whose
RPC is a running devnet, metering on or off, the request log on or off. Run by bench/api.py
and bench/request_log_cost.py, not by hand."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import cast

import uvicorn
from fastapi import FastAPI

from entryway.bundler.rpc_methods import BundlerRpc
from entryway.chain.rpc import EthClient, JsonRpcClient
from entryway.deploy.deployer import Deployment
from entryway.service.app import create_app
from entryway.service.ratelimit import RateLimiter, parse_limits
from entryway.service.services import ChainRuntime, Services
from entryway.storage.engine import make_engine, migrate
from entryway.storage.store import Store


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--rpc-url", required=True)
    parser.add_argument("--chain-id", type=int, required=True)
    parser.add_argument("--deployment", required=True, help="JSON of the chain's Deployment")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--metering", choices=["on", "off"], default="on")
    parser.add_argument(
        "--request-log", choices=["on", "off"], default="on", help="off: no call is recorded"
    )
    args = parser.parse_args()
    services = Services()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        engine = make_engine(args.database_url)
        await migrate(engine)
        limiter = RateLimiter(parse_limits("FREE=1000000/second"))
        platform = services.attach(Store(engine), limiter=limiter, metering=args.metering == "on")
        await platform.meter.start()
        recorder = services.request_log
        assert recorder is not None
        if args.request_log == "off":  # the service as it was before it kept a request log
            services.request_log = None
        log_writer = asyncio.create_task(recorder.run_forever())  # as `entryway up` logs calls
        async with JsonRpcClient(args.rpc_url) as rpc:
            deployment = Deployment(**json.loads(args.deployment))
            bundler = cast(BundlerRpc, None)  # the read endpoint never reaches the bundler
            services.chains[args.chain_id] = ChainRuntime(
                args.chain_id, args.rpc_url, deployment, bundler, EthClient(rpc)
            )
            yield
        await platform.meter.stop()
        log_writer.cancel()
        await recorder.close()
        await engine.dispose()

    app = create_app(services, lifespan)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
