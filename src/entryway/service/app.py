"""The HTTP API. `create_app(services)` is the only place routes meet the use cases."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Annotated, Any

import orjson
from fastapi import FastAPI, Query, Request
from fastapi.responses import JSONResponse, Response

from entryway import __version__
from entryway.domain.chain_access import (
    AccessContext,
    ChainNotRecognisedError,
    PlanNetworkNotAllowedError,
    check_chain_access,
)
from entryway.domain.networks import NETWORKS
from entryway.domain.plans import plan
from entryway.service.auth import CurrentCaller
from entryway.service.problems import Problem
from entryway.service.services import Services
from entryway.storage.store import Caller

API_VERSION = "v1"


def create_app(
    services: Services,
    lifespan: Callable[[FastAPI], AbstractAsyncContextManager[None]] | None = None,
) -> FastAPI:
    app = FastAPI(title="Entryway", version=__version__, lifespan=lifespan)
    app.state.services = services

    @app.exception_handler(Problem)
    async def problem(request: Request, exc: Problem) -> Response:
        return exc.response(request.url.path)

    @app.middleware("http")
    async def version_header(request: Request, call_next: Any) -> Response:
        response: Response = await call_next(request)
        response.headers["Entryway-API-Version"] = API_VERSION
        return response

    def usable_chain(who: Caller, chain_id: int) -> None:
        ctx = AccessContext(
            who.project_chains, who.key_chains, who.aa_module_enabled, plan(who.plan)
        )
        try:
            check_chain_access(chain_id, ctx)
        except ChainNotRecognisedError as exc:
            checks = [{"check": c.name, "passed": c.passed} for c in exc.checks]
            raise Problem(
                403, exc.code, "Chain ID not recognised", str(exc), checks=checks
            ) from None
        except PlanNetworkNotAllowedError as exc:
            raise Problem(403, exc.code, "Network not in plan", str(exc)) from None

    @app.get("/healthz", operation_id="health")
    async def health() -> dict[str, object]:
        return {"status": "ok", "chains": sorted(services.chains)}

    async def sdk_defaults_for(who: Caller, chain_id: int, request: Request) -> dict[str, Any]:
        usable_chain(who, chain_id)
        chain = services.chains.get(chain_id)
        if chain is None:
            raise Problem(
                503, "network_connection_problem", "Network connection problem",
                f"chain {chain_id} is enabled but this service has no RPC endpoint for it",
            )  # fmt: skip
        network = NETWORKS[chain_id]
        base = str(request.base_url).rstrip("/")
        return {
            "chainId": chain_id,
            "network": network.name,
            "nativeToken": network.native_token.symbol,
            "explorer": network.explorer_url,
            "entryPoint": chain.deployment.entry_point,
            "accountFactory": chain.deployment.account_factory,
            "paymaster": chain.deployment.paymaster,
            "notary": chain.deployment.notary,
            "bundlerUrl": f"{base}/rpc/{chain_id}",
            "minPriorityFeePerGas": hex(network.fee_rules.min_priority_fee_per_gas),
        }

    for prefix in ("", f"/{API_VERSION}"):

        @app.get(f"{prefix}/get-sdk-defaults", operation_id=f"getSdkDefaults{prefix.strip('/')}")
        async def get_sdk_defaults(
            who: CurrentCaller, request: Request, chain_id: Annotated[int, Query(alias="chainId")]
        ) -> dict[str, Any]:
            """What the SDK needs for one chain."""
            return await sdk_defaults_for(who, chain_id, request)

        @app.get(f"{prefix}/sdk-defaults", operation_id=f"listSdkDefaults{prefix.strip('/')}")
        async def sdk_defaults(who: CurrentCaller, request: Request) -> dict[str, Any]:
            """The same for every chain this key may use (unusable ones are left out)."""
            usable = {}
            for chain_id in sorted(who.key_chains & who.project_chains):
                try:
                    usable[str(chain_id)] = await sdk_defaults_for(who, chain_id, request)
                except Problem:
                    continue
            return {"chains": usable}

    @app.post("/rpc/{chain_id}", operation_id="bundlerRpc")
    async def bundler_rpc(who: CurrentCaller, chain_id: int, request: Request) -> Response:
        """ERC-4337 (and ERC-7677, later) JSON-RPC for one chain."""
        usable_chain(who, chain_id)
        chain = services.chains.get(chain_id)
        if chain is None:
            raise Problem(503, "network_connection_problem", "Network connection problem")
        try:
            payload = orjson.loads(await request.body())
        except orjson.JSONDecodeError:
            error = {"code": -32700, "message": "parse error"}
            return JSONResponse({"jsonrpc": "2.0", "id": None, "error": error})
        if isinstance(payload, list):
            answers = [a for a in [await chain.rpc.dispatch(p) for p in payload] if a is not None]
            return JSONResponse(answers)
        answer = await chain.rpc.dispatch(payload)
        return JSONResponse(answer) if answer is not None else Response(status_code=204)

    return app
