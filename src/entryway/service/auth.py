"""Who is calling: the API key on the request, resolved to its project and key, then held to
its plan's rate limit."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from entryway.domain.apikeys import InvalidApiKeyError
from entryway.service.problems import Problem, invalid_api_key
from entryway.service.services import Services
from entryway.storage.store import Caller

# Declared for the OpenAPI document (securitySchemes); the key itself is read below so that
# the JSON-RPC endpoint can also take it from `?apikey=`.
bearer = HTTPBearer(auto_error=False, scheme_name="ApiKey", description="Bearer <API_KEY>")


async def current_caller(
    request: Request, _: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
) -> Caller:
    """The project and key behind the request's API key, or 401; over the limit, 429."""
    services: Services = request.app.state.services
    try:
        caller = await services.store.authenticate(_presented_key(request))
    except InvalidApiKeyError as exc:
        raise invalid_api_key(str(exc)) from None
    limiter = services.platform.limiter
    if limiter is not None:
        decision = await limiter.hit(caller.plan, caller.key_id)
        request.state.rate_limit_headers = decision.headers()
        if not decision.allowed:
            raise Problem(
                429,
                "rate_limited",
                "Rate limit exceeded",
                f"the {caller.plan.value} plan allows {decision.limit} requests per window "
                f"per API key; retry after {decision.reset_seconds} s",
                headers=decision.headers(),
            )
    return caller


CurrentCaller = Annotated[Caller, Depends(current_caller)]


def _presented_key(request: Request) -> str:
    """Bearer header; the JSON-RPC endpoint also takes `?apikey=` as bundler clients expect."""
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        return header[7:].strip()
    key = request.query_params.get("apikey")
    if key:
        return key
    raise invalid_api_key("send Authorization: Bearer <API_KEY>")
