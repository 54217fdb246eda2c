"""Chain-bound endpoints: SDK defaults, the JSON-RPC endpoint (bundler, paymaster), account
and op status. Each checks the caller may use the chain (seed section 7, "chain ID not
recognised") and that the network answers ("network connection problem")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, Response

from entryway.bundler.errors import BundlerError
from entryway.bundler.rpc_types import parse_user_operation
from entryway.domain.evm import checksum
from entryway.domain.networks import NETWORKS
from entryway.domain.userop import UserOperation
from entryway.paymaster.costs import sponsorship_key
from entryway.paymaster.erc7677 import PaymasterCaller, PaymasterRpc
from entryway.paymaster.settlement import (
    SETTLE_MAX_ATTEMPTS,
    SETTLE_POLL_SECONDS,
    SETTLE_TASK,
    SponsoredOp,
    settle_payload,
)
from entryway.service.auth import CurrentCaller
from entryway.service.chain_access import ChainGate
from entryway.service.problems import Problem
from entryway.service.schemas import AccountInfoOut, OpStatusOut, SdkDefaults, SdkDefaultsList
from entryway.service.services import ChainRuntime, Services
from entryway.storage.store import Caller
from entryway.storage.tasks import TaskQueue
from entryway.wallets.account_info import read_account

ChainIdQuery = Annotated[int, Query(alias="chainId", ge=1, le=2**53)]


def chain_routes(prefixes: tuple[str, ...]) -> APIRouter:
    router = APIRouter()
    usable_chain = ChainGate().usable_chain

    def defaults(request: Request, chain: ChainRuntime) -> SdkDefaults:
        network = NETWORKS[chain.chain_id]
        base = str(request.base_url).rstrip("/")
        return SdkDefaults(
            chain_id=chain.chain_id,
            network=network.name,
            testnet=network.is_testnet,
            native_token=network.native_token.symbol,
            explorer=network.explorer_url,
            entry_point=chain.deployment.entry_point,
            account_factory=chain.deployment.account_factory,
            paymaster=chain.deployment.paymaster,
            notary=chain.deployment.notary,
            bundler_url=f"{base}/rpc/{chain.chain_id}",
            min_priority_fee_per_gas=hex(network.fee_rules.min_priority_fee_per_gas),
        )

    for prefix in prefixes:
        suffix = "V1" if prefix else ""

        @router.get(
            f"{prefix}/get-sdk-defaults",
            operation_id=f"getSdkDefaults{suffix}",
            tags=["sdk"],
        )
        async def get_sdk_defaults(
            who: CurrentCaller, request: Request, chain_id: ChainIdQuery
        ) -> SdkDefaults:
            """What the SDK needs for one chain (free)."""
            chain = await usable_chain(request, who, chain_id)
            request.app.state.services.platform.meter.count_read(who, "get-sdk-defaults", chain_id)
            return defaults(request, chain)

        @router.get(f"{prefix}/sdk-defaults", operation_id=f"listSdkDefaults{suffix}", tags=["sdk"])
        async def sdk_defaults(who: CurrentCaller, request: Request) -> SdkDefaultsList:
            """`/get-sdk-defaults` for every chain this key may use now; chains that fail the
            access or network checks are left out (free)."""
            usable: dict[str, SdkDefaults] = {}
            for chain_id in sorted(who.key_chains & who.project_chains):
                try:
                    usable[str(chain_id)] = defaults(
                        request, await usable_chain(request, who, chain_id)
                    )
                except Problem:
                    continue
            request.app.state.services.platform.meter.count_read(who, "sdk-defaults")
            return SdkDefaultsList(chains=usable)

        @router.get(f"{prefix}/account-info", operation_id=f"accountInfo{suffix}", tags=["wallets"])
        async def account_info(
            who: CurrentCaller,
            request: Request,
            chain_id: ChainIdQuery,
            address: Annotated[str, Query(pattern=r"^0x[0-9a-fA-F]{40}$")],
        ) -> AccountInfoOut:
            """An account as the chain sees it: deployed, nonce, deposit and, for Entryway
            smart accounts, owner, guardians, threshold and pending recovery (free)."""
            chain = await usable_chain(request, who, chain_id)
            info = await read_account(chain.eth, chain.deployment, checksum(address))
            request.app.state.services.platform.meter.count_read(who, "account-info", chain_id)
            return AccountInfoOut.of(chain_id, info)

        @router.get(f"{prefix}/op-status", operation_id=f"opStatus{suffix}", tags=["userops"])
        async def op_status(
            who: CurrentCaller,
            request: Request,
            chain_id: ChainIdQuery,
            user_op_hash: Annotated[str, Query(alias="userOpHash", pattern=r"^0x[0-9a-fA-F]{64}$")],
        ) -> OpStatusOut:
            """A UserOperation this project sent: pending, submitted, included, failed or
            dropped (free). Another project's operation is not found."""
            chain = await usable_chain(request, who, chain_id)
            services: Services = request.app.state.services
            mine = await services.store.ledger.owns(who.project_id, _op_key(chain_id, user_op_hash))
            if not mine:
                raise Problem(
                    404, "op_not_found", "UserOperation not found",
                    f"no UserOperation {user_op_hash} sent by this project on chain {chain_id}",
                )  # fmt: skip
            status = await chain.rpc.op_status([user_op_hash])
            credits, final = await services.store.ledger.credits_for(
                who.project_id, user_op_hash.lower()
            )
            services.platform.meter.count_read(who, "op-status", chain_id)
            return OpStatusOut(
                chain_id=chain_id,
                user_op_hash=user_op_hash.lower(),
                credits=credits,
                credits_final=final,
                **status,
            )

    @router.post("/rpc/{chain_id}", operation_id="jsonRpc", tags=["rpc"])
    async def json_rpc(who: CurrentCaller, chain_id: int, request: Request) -> Response:
        """ERC-4337 bundler (and ERC-7677 paymaster) JSON-RPC for one chain; single or batch."""
        chain = await usable_chain(request, who, chain_id)
        try:
            payload = orjson.loads(await request.body())
        except orjson.JSONDecodeError:
            error = {"code": -32700, "message": "parse error"}
            return JSONResponse({"jsonrpc": "2.0", "id": None, "error": error})
        if isinstance(payload, list):
            answers = [
                a for a in [await _one(request, who, chain, p) for p in payload] if a is not None
            ]
            return JSONResponse(answers)
        answer = await _one(request, who, chain, payload)
        return JSONResponse(answer) if answer is not None else Response(status_code=204)

    return router


async def _follow_sponsorship(
    services: Services, who: Caller, chain_id: int, op_hash: str, op: UserOperation
) -> None:
    """Tie the op's sponsorship hold to its hash, and queue the durable task that settles it
    from the receipt (or releases it): once per op, whatever the retries."""
    key = sponsorship_key(chain_id, op)
    await services.store.ledger.link(who.project_id, key, op_hash)
    valid_until = int.from_bytes(op.paymaster_data[:6], "big") or 2**48 - 1
    sponsored = SponsoredOp(who.project_id, chain_id, op_hash, op, valid_until)
    await TaskQueue(services.store.engine).enqueue(
        SETTLE_TASK,
        settle_payload(sponsored),
        project_id=who.project_id,
        run_at=datetime.now(UTC) + timedelta(seconds=SETTLE_POLL_SECONDS),
        idempotency_key=f"{chain_id}:{op_hash}",
        max_attempts=SETTLE_MAX_ATTEMPTS,
    )


def _op_key(chain_id: int, user_op_hash: str) -> str:
    return f"userop:{chain_id}:{user_op_hash.lower()}"


async def _one(
    request: Request, who: Caller, chain: ChainRuntime, payload: Any
) -> dict[str, Any] | None:
    """Dispatch one call and meter it. `pm_*` go to the paymaster (which holds the sponsored
    op's credits itself); an accepted eth_sendUserOperation is charged its relay (nothing
    more when our paymaster sponsors it) and, when sponsored, followed until its hold settles;
    other calls are counted."""
    services: Services = request.app.state.services
    method = payload.get("method") if isinstance(payload, dict) else None
    if isinstance(method, str) and method.startswith("pm_") and services.paymaster is not None:
        return await _paymaster(services.paymaster, who, chain.chain_id, payload)
    answer = await chain.rpc.dispatch(payload)
    meter = services.platform.meter
    if method == "eth_sendUserOperation" and answer is not None and "result" in answer:
        op = parse_user_operation(payload["params"][0])
        op_hash = str(answer["result"])
        sponsored = (op.paymaster or "").lower() == chain.deployment.paymaster.lower()
        quote = services.prices.relayed_user_operation(
            calls=1, calldata_bytes=len(op.call_data), sponsored=sponsored
        )
        await meter.charge(
            who,
            quote,
            _op_key(chain.chain_id, op_hash),
            endpoint="rpc:eth_sendUserOperation",
            chain_id=chain.chain_id,
            subject=op.sender,
            reference=op_hash.lower(),
        )
        if sponsored:
            await _follow_sponsorship(services, who, chain.chain_id, op_hash.lower(), op)
    elif isinstance(method, str):
        meter.count_read(who, f"rpc:{method}"[:100], chain.chain_id)
    return answer


async def _paymaster(
    paymaster: PaymasterRpc, who: Caller, chain_id: int, payload: dict[str, Any]
) -> dict[str, Any] | None:
    envelope: dict[str, Any] = {"jsonrpc": "2.0", "id": payload.get("id")}
    try:
        params = payload.get("params", [])
        caller = PaymasterCaller(who.project_id, who.key_id, chain_id)
        envelope["result"] = await paymaster.dispatch(str(payload["method"]), params, caller)
    except BundlerError as exc:
        envelope["error"] = exc.to_rpc()
    return envelope if "id" in payload else None
