"""Who is calling: the API key on the request, resolved to its project, key and role, then
held to its project's rate limit (shared by the project's keys). `AdminCaller` further
requires an admin key."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from entryway.domain.apikeys import InvalidApiKeyError, KeyRole
from entryway.service import late_limit
from entryway.service.late_limit import HEAVY_DECISION, apply_decision
from entryway.service.problems import Problem, invalid_api_key
from entryway.service.ratelimit import Decision
from entryway.service.services import Services
from entryway.storage.store import Caller

# Declared for the OpenAPI document (securitySchemes); the key itself is read below so that
# the JSON-RPC endpoint can also take it from `?apikey=`.
bearer = HTTPBearer(auto_error=False, scheme_name="ApiKey", description="Bearer <API_KEY>")
# The one route that takes `?apikey=`: bundler clients put the key in the RPC URL.
JSON_RPC_ROUTE = ("POST", "/rpc/{chain_id}")
# On the request's state: set (by `json_rpc_shortcut`) when the request is one heavy JSON-RPC
# call, so that both its windows are counted at once; then the heavy window's decision.
HEAVY_CALL = "heavy_call"
# On the request's state: the JSON-RPC body as parsed once (by `json_rpc_shortcut`), so that
# the route does not parse it again.
RPC_PAYLOAD = "rpc_payload"


def heavy_decision(request: Request) -> Decision | None:
    """The heavy window's decision `current_caller` made for this request, taken once."""
    decision: Decision | None = getattr(request.state, HEAVY_DECISION, None)
    setattr(request.state, HEAVY_DECISION, None)
    return decision


async def current_caller(
    request: Request, _: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
) -> Caller:
    """The project and key behind the request's API key, or 401; from an origin or client
    address the key's allowlists leave out, 403; over the limit, 429."""
    services: Services = request.app.state.services
    try:
        caller = await services.store.authenticate(_presented_key(request))
    except InvalidApiKeyError as exc:
        raise invalid_api_key(str(exc)) from None
    request.state.caller = caller  # for the request log (service/call_recording.py)
    client = request.client.host if request.client else None
    refused = caller.allowlist.refusal(request.headers.get("origin"), client)
    if refused is not None:
        code, detail = refused
        raise Problem(403, code, "Not allowed from here", detail)
    limiter = services.platform.limiter
    if limiter is not None:
        if not getattr(request.state, HEAVY_CALL, False):
            apply_decision(request, caller, await limiter.hit(caller.plan, caller.project_id))
        elif not late_limit.start(request, limiter, caller):
            # One heavy JSON-RPC call: its heavy window counted in the same round trip, for
            # the route to read (`heavy_decision`) instead of counting it again.
            decision, heavy = await limiter.hit_with_heavy(caller.plan, caller.project_id)
            apply_decision(request, caller, decision, heavy)
    return caller


CurrentCaller = Annotated[Caller, Depends(current_caller)]


async def admin_caller(caller: CurrentCaller) -> Caller:
    """The caller, if its key is an admin key; a service key gets 403."""
    if caller.role is not KeyRole.ADMIN:
        raise Problem(
            403,
            "admin_key_required",
            "Admin key required",
            "this route administers the project and takes an admin key; service keys use "
            "the service (JSON-RPC, wallets, notarizations, status, credits and usage)",
        )
    return caller


AdminCaller = Annotated[Caller, Depends(admin_caller)]


def _presented_key(request: Request) -> str:
    """Bearer header; the JSON-RPC endpoint also takes `?apikey=` as bundler clients expect.
    Elsewhere a key in the URL is refused rather than read: URLs end up in logs, proxies and
    browser histories, so a REST client sending one should learn it at once."""
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip()
    key = request.query_params.get("apikey")
    if key and _is_json_rpc(request):
        return key
    if key:
        raise invalid_api_key(
            "?apikey= is accepted by POST /rpc/{chainId} only; send Authorization: Bearer <API_KEY>"
        )
    raise invalid_api_key("send Authorization: Bearer <API_KEY>")


def _is_json_rpc(request: Request) -> bool:
    route = request.scope.get("route")
    return (request.method, getattr(route, "path", None)) == JSON_RPC_ROUTE
