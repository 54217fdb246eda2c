"""Chain-bound endpoints: SDK defaults, the JSON-RPC endpoint (bundler, paymaster), account
and op status. Each checks the caller may use the chain (requirements §7, "chain ID not
recognised") and that the network answers ("network connection problem")."""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import replace
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response
from pydantic import BeforeValidator

from entryway.bundler.errors import BundlerError, RpcErrorCode, node_failure, node_unanswered
from entryway.bundler.rpc_batch import batch_refusal, is_heavy, limited, run_batch
from entryway.bundler.validation.modes import unchecked_by
from entryway.chain.rpc import RpcTransportError
from entryway.domain.evm import checksum, to_hex
from entryway.domain.networks import NETWORKS
from entryway.domain.userop import UserOperation
from entryway.paymaster.erc7677 import PaymasterCaller, PaymasterRpc
from entryway.paymaster.ports import ENTRYWAY
from entryway.paymaster.relay_accounting import RelayAccounting, op_usage_key
from entryway.service import late_limit
from entryway.service.auth import RPC_PAYLOAD, CurrentCaller, heavy_decision
from entryway.service.call_recording import RPC_LOGGED, explained, rpc_call
from entryway.service.chain_access import NODE_RETRY_AFTER_S, ChainGate
from entryway.service.edge import REQUEST_ID_HEADER, request_id_of
from entryway.service.late_limit import LateDecision, RefusedLate
from entryway.service.limits import RequestLimits
from entryway.service.problems import Problem
from entryway.service.refused_ops import refused_op_hash
from entryway.service.schemas import AccountInfoOut, OpStatusOut, SdkDefaults, SdkDefaultsList
from entryway.service.services import ChainRuntime, Services
from entryway.service.strict_json import json_response
from entryway.storage.outage import database_unavailable
from entryway.storage.request_log import SEND
from entryway.storage.store import Caller
from entryway.wallets.account_info import read_account

STATUS_METHOD = "entryway_getUserOperationStatus"
log = logging.getLogger(__name__)
UNKNOWN_METHOD = "rpc:unknown"  # the usage endpoint of every method not served


def _decimal(value: object) -> object:
    """A chain id as the URL spells it: plain decimal digits. Without this check `80002.0`,
    `+80002` or `0080002` would all be taken for chain 80002."""
    if isinstance(value, str) and not (
        value.isascii() and value.isdigit() and len(value) <= 16 and value[0] != "0"
    ):
        raise ValueError("a chain id is a decimal integer: digits only, no leading zero")
    return value


ChainIdQuery = Annotated[int, Query(alias="chainId", ge=1, le=2**53), BeforeValidator(_decimal)]
ChainIdPath = Annotated[int, Path(ge=1, le=2**53), BeforeValidator(_decimal)]


def chain_routes(prefixes: tuple[str, ...]) -> APIRouter:
    router = APIRouter()
    usable_chain = ChainGate().usable_chain

    def defaults(request: Request, chain: ChainRuntime) -> SdkDefaults:
        network = NETWORKS[chain.chain_id]
        base = str(request.base_url).rstrip("/")
        mode = chain.rpc.bundler.validator.mode
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
            entry_point_v07=chain.deployment.entry_point_v07,
            paymaster_v07=chain.deployment.paymaster_v07,
            simple_account_factory_v07=chain.deployment.simple_account_factory_v07,
            entry_point_v09=chain.deployment.entry_point_v09,
            paymaster_v09=chain.deployment.paymaster_v09,
            simple_account_factory_v09=chain.deployment.simple_account_factory_v09,
            entry_point_v06=chain.deployment.entry_point_v06,
            paymaster_v06=chain.deployment.paymaster_v06,
            simple_account_factory_v06=chain.deployment.simple_account_factory_v06,
            simple_7702_account=chain.deployment.simple_7702_account,
            validation_mode=mode.value,
            unchecked_rules=list(unchecked_by(mode)),
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
            for chain_id in sorted(who.chains):
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
            """A UserOperation this project sent, or one our paymaster signed for it:
            pending, submitted, included, failed or dropped (free); once mined, its
            `confirmations`, whether it is `final` by the chain's finality depth, and
            `submittedBy` ("entryway" when sent through this service, "external" when it
            was mined around it). Another project's operation is not found."""
            chain = await usable_chain(request, who, chain_id)
            services: Services = request.app.state.services
            store = services.store
            sent = await store.ledger.owns(who.project_id, op_usage_key(chain_id, user_op_hash))
            signed = await store.signatures.by_hash(chain_id, user_op_hash)
            if signed is not None and signed.project_id != who.project_id:
                signed = None
            if not sent and signed is None:
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
                submitted_by=ENTRYWAY if sent else (signed.submitted_by if signed else None),
                **status,
            )

    @router.post("/rpc/{chain_id}", operation_id="jsonRpc", tags=["rpc"])
    async def json_rpc(who: CurrentCaller, chain_id: ChainIdPath, request: Request) -> Response:
        """ERC-4337 bundler (and ERC-7677 paymaster) JSON-RPC for one chain; single or batch.
        Every call of a batch counts toward the project's rate limit, and each heavy call
        toward its heavy-call limit; docs/api.md has the batch limits."""
        chain = await usable_chain(request, who, chain_id)
        payload = getattr(request.state, RPC_PAYLOAD, None)  # parsed by the shortcut
        if payload is None:
            try:
                # The edge has checked the body's size, depth and syntax; orjson's own
                # recursion bound holds whatever Python's limit is.
                payload = orjson.loads(await request.body())
            except orjson.JSONDecodeError:
                error = {"code": -32700, "message": "parse error"}
                return json_response({"jsonrpc": "2.0", "id": None, "error": error})
        if not isinstance(payload, list):
            answer = await _one(request, who, chain, payload)
            if answer is None:
                return Response(status_code=204)
            if node_unanswered(answer):
                # The node failed after the network check passed: the same 503 and
                # Retry-After as a failed check, so clients back off the same way.
                retry = {"Retry-After": str(NODE_RETRY_AFTER_S)}
                return json_response(answer, status_code=503, headers=retry)
            return json_response(answer)
        limits: RequestLimits = request.app.state.limits
        refusal = batch_refusal(payload, limits.max_rpc_batch)
        if refusal is not None:
            return json_response(refusal)
        admitted, over_limit = await _admit_batch(request, who, len(payload))

        async def call(one: Any) -> dict[str, Any] | None:
            return await _one(request, who, chain, one)

        answers = await run_batch(
            payload,
            call,
            max_heavy=limits.max_rpc_batch_heavy,
            admitted=admitted,
            over_rate_limit=over_limit,
        )
        # HTTP 200 even when calls were refused: the calls before them ran (an op may have
        # been sent), and their answers must reach the client.
        return json_response(answers)

    return router


async def _admit_batch(request: Request, who: Caller, calls: int) -> tuple[int, str]:
    """How many calls of the batch the project's rate limit admits, and what the others are
    told. The request itself was counted as one call when the key was checked; the rest count
    here."""
    limiter = request.app.state.services.platform.limiter
    if limiter is None or calls <= 1:
        return calls, ""
    granted, decision = await limiter.grant(who.plan, who.project_id, calls - 1)
    request.state.rate_limit_headers = decision.headers()
    over = (
        f"limit exceeded: the {who.plan.value} plan allows {decision.limit} requests per "
        f"window per project, each call of a batch counting as one; retry after "
        f"{max(decision.reset_seconds, 1)} s"
    )
    return 1 + granted, over


async def _heavy_refusal(request: Request, who: Caller, payload: Any) -> str | None:
    """Why a heavy call may not run now (over the project's heavy-call window), else None
    with the call counted. A refusal also puts Retry-After on the response."""
    limiter = request.app.state.services.platform.limiter
    if limiter is None or not is_heavy(payload):
        return None
    decision = heavy_decision(request) or await limiter.hit_heavy(who.plan, who.project_id)
    if decision.allowed:
        return None
    wait = max(decision.reset_seconds, 1)
    headers = getattr(request.state, "rate_limit_headers", {})
    request.state.rate_limit_headers = {**headers, "Retry-After": str(wait)}
    return (
        f"limit exceeded: the {who.plan.value} plan allows {decision.limit} heavy calls "
        "(eth_estimateUserOperationGas, eth_sendUserOperation, pm_*) per window per project; "
        f"retry after {wait} s"
    )


async def _one(
    request: Request, who: Caller, chain: ChainRuntime, payload: Any
) -> dict[str, Any] | None:
    """One call answered, its error explained (`data.explanation`) and logged."""
    started = time.perf_counter_ns()
    answer = await _answer(request, who, chain, payload)
    explanation = explained(answer)
    recorder = request.app.state.services.request_log
    if recorder is not None:
        setattr(request.state, RPC_LOGGED, True)
        method = payload.get("method") if isinstance(payload, dict) else None
        name = _logged_name(request.app.state.services, chain, method)
        status = 503 if answer is not None and node_unanswered(answer) else 200
        call = rpc_call(
            who,
            chain.chain_id,
            name,
            payload,
            answer,
            started_ns=started,
            http_status=status,
            explanation=explanation,
        )
        if name == SEND and call.outcome == "error":
            # Kept with its hash: the op's page answers `refused` with the reason.
            call = replace(call, user_op_hash=await refused_op_hash(chain, payload))
        recorder.record(call)
    return answer


async def _answer(
    request: Request, who: Caller, chain: ChainRuntime, payload: Any
) -> dict[str, Any] | None:
    """Dispatch one call and meter it (`_answered`). A call that ran before its rate-limit
    decision (`late_limit`) is answered as that decision says once it is in: a refused call's
    effects never started (its accounting waits for the decision), and its answer is the
    refusal."""
    late = late_limit.pending(request)
    if late is None:
        return await _answered(request, who, chain, payload, None)
    answer = None
    with contextlib.suppress(RefusedLate):
        answer = await _answered(request, who, chain, payload, late)
    await late.settle(request)  # the project's window refused it: 429
    refusal = await _heavy_refusal(request, who, payload)
    if refusal is not None:
        return limited(payload, refusal)
    return answer


async def _answered(
    request: Request, who: Caller, chain: ChainRuntime, payload: Any, late: LateDecision | None
) -> dict[str, Any] | None:
    """Dispatch one call and meter it; whatever fails inside it is answered as a JSON-RPC
    error carrying the call's id (-32603 and no internals for the unexpected), so one failing
    call never turns the response into a problem document nor stops the rest of a batch.
    A database that cannot be reached is the exception: the whole request is answered 503
    with Retry-After (service/edge.py), which clients retry; sending it again is safe."""
    try:
        if late is None:
            refusal = await _heavy_refusal(request, who, payload)
            if refusal is not None:
                return limited(payload, refusal)
        return await _dispatch(request, who, chain, payload, late)
    except RefusedLate:
        raise
    except RpcTransportError as exc:
        # The node client logged the outage once; the call is told so, without a traceback.
        if not isinstance(payload, dict) or "id" not in payload:
            return None
        return {"jsonrpc": "2.0", "id": payload["id"], "error": node_failure(exc).to_rpc()}
    except Exception as exc:
        if database_unavailable(exc):
            raise
        log.exception(
            "JSON-RPC call failed on chain %s (request id %s)",
            chain.chain_id,
            _request_id(request),
        )
        if not isinstance(payload, dict) or "id" not in payload:
            return None  # a notification is never answered, not even with an error
        error = {"code": int(RpcErrorCode.INTERNAL_ERROR), "message": "internal error"}
        return {"jsonrpc": "2.0", "id": payload["id"], "error": error}


async def _with_origin(
    services: Services, who: Caller, chain_id: int, payload: dict[str, Any], status: Any
) -> None:
    """The caller's own op (sent here, or signed by our paymaster for its project) says
    where it came from, as /op-status does: `submittedBy` "entryway" or "external"."""
    params = payload.get("params")
    if not isinstance(status, dict) or not isinstance(params, list) or not params:
        return
    op_hash = str(params[0]).lower()
    if await services.store.ledger.owns(who.project_id, op_usage_key(chain_id, op_hash)):
        status["submittedBy"] = ENTRYWAY
        return
    signed = await services.store.signatures.by_hash(chain_id, op_hash)
    if signed is not None and signed.project_id == who.project_id and signed.submitted_by:
        status["submittedBy"] = signed.submitted_by


def _request_id(request: Request) -> str:
    return request_id_of(request.scope) or request.headers.get(REQUEST_ID_HEADER, "")


async def _dispatch(
    request: Request, who: Caller, chain: ChainRuntime, payload: Any, late: LateDecision | None
) -> dict[str, Any] | None:
    """`pm_*` go to the paymaster (which holds the sponsored op's credits itself). An
    eth_sendUserOperation is accounted once validated and before it enters the mempool: its
    relay charged and, when our paymaster sponsors it, its hold linked and its settlement
    queued, in one transaction; if that fails the op is refused. Other calls are counted.
    With `late`, the op is accounted only once its rate-limit windows have admitted it."""
    services: Services = request.app.state.services
    method = payload.get("method") if isinstance(payload, dict) else None
    if isinstance(method, str) and method.startswith("pm_") and services.paymaster is not None:
        return await _paymaster(services.paymaster, who, chain.chain_id, payload)
    if method != "eth_sendUserOperation":
        answer = await chain.rpc.dispatch(payload)
        if method == STATUS_METHOD and answer is not None and "result" in answer:
            await _with_origin(services, who, chain.chain_id, payload, answer["result"])
        if isinstance(method, str):
            services.platform.meter.count_read(who, usage_endpoint(chain, method), chain.chain_id)
        return answer
    accounting = RelayAccounting(
        services.store.ledger,
        services.prices,
        on_charged=services.platform.meter.alerts_may_be_due,
        counted=services.platform.meter.counted,
    )

    async def account(op: UserOperation, op_hash: bytes) -> None:
        if late is not None and not await late.admits():
            raise RefusedLate  # nothing written: `_answer` answers the refusal
        await accounting.record_accepted_op(
            project_id=who.project_id,
            chain_id=chain.chain_id,
            op=op,
            user_op_hash=to_hex(op_hash),
            service_paymaster=chain.deployment.service_paymaster_of(op.paymaster),
            endpoint="rpc:eth_sendUserOperation",
            key_id=who.key_id,
        )

    return await chain.rpc.dispatch(payload, before_mempool=account)


def _logged_name(services: Services, chain: ChainRuntime, method: object) -> str:
    """The bounded name a call is logged under: the usage endpoint, `pm_*` of the paymaster
    included; `rpc:invalid` for a call with no method name."""
    if not isinstance(method, str):
        return "rpc:invalid"
    if services.paymaster is not None and method in services.paymaster.methods:
        return f"rpc:{method}"
    return usage_endpoint(chain, method)


def usage_endpoint(chain: ChainRuntime, method: str) -> str:
    """The name a call is counted under: `rpc:<method>` for the methods served, one
    `rpc:unknown` for every other name (answered -32601), so made-up names cannot add a usage
    row each."""
    return f"rpc:{method}" if method in chain.rpc.methods else UNKNOWN_METHOD


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
