"""The HTTP transport webhook deliveries go through: it checks where a request would go after
DNS, and connects only there.

For each request the host is resolved once, here. Every address it resolves to is checked
against the destination policy (entryway.domain.destinations); one refused address refuses the
request, before any connection is made, and so does a name that gives no address (it does not
resolve, the resolver fails or times out): to the tenant both read the same. The request then
goes to a checked address, the first that accepts a connection, with the name kept in the Host
header and as the TLS server name (SNI and the certificate check, through httpx's
`sni_hostname` request extension). No second
lookup happens, so a DNS answer that changes between the check and the connection (rebinding)
changes nothing. Proxies from the environment are not used: they would connect elsewhere.

Connections are not kept alive: a pool is keyed by address, and a connection opened (and its
certificate checked) for one name must not carry a request for another name on that address.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable, Mapping, Sequence
from ipaddress import ip_address

import httpx

from entryway.domain.destinations import (
    PRIVATE_ALLOWED,
    PUBLIC_ONLY,
    Destination,
    DestinationNotAllowedError,
    DestinationPolicy,
    IPAddress,
    check_destination,
)
from entryway.errors import ConfigurationError

ALLOW_PRIVATE_ENV = "ENTRYWAY_WEBHOOK_ALLOW_PRIVATE"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")

# The addresses a host name resolves to, as text (as getaddrinfo gives them).
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]


async def system_resolver(host: str, port: int) -> Sequence[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def destination_policy_from_env(env: Mapping[str, str]) -> DestinationPolicy:
    """ENTRYWAY_WEBHOOK_ALLOW_PRIVATE: true lets endpoints point at private addresses."""
    value = env.get(ALLOW_PRIVATE_ENV, "").strip().lower()
    if value not in _TRUE + _FALSE:
        raise ConfigurationError(f"{ALLOW_PRIVATE_ENV} is true or false, not {value!r}")
    return PRIVATE_ALLOWED if value in _TRUE else PUBLIC_ONLY


class UnresolvedDestinationError(DestinationNotAllowedError):
    """The host gave no address to check (unknown name, resolver error or timeout). It is a
    refusal like a forbidden address, so a tenant cannot tell an internal name from an unknown
    one; the message, with the detail, is for the operator's log only."""


class GuardedTransport(httpx.AsyncBaseTransport):
    def __init__(
        self,
        policy: DestinationPolicy = PUBLIC_ONLY,
        *,
        resolver: Resolver = system_resolver,
        inner: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.policy = policy
        self.resolver = resolver
        self._inner = inner or httpx.AsyncHTTPTransport(
            limits=httpx.Limits(max_keepalive_connections=0), trust_env=False
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """The answer of the first checked address that accepts a connection; raises
        DestinationNotAllowedError, having connected nowhere, if the policy refuses the URL
        or any address its host resolves to."""
        destination = check_destination(str(request.url), self.policy)
        addresses = await self._addresses(destination, request)
        unreachable = httpx.ConnectError("no address accepted a connection", request=request)
        for address in addresses:
            pinned = httpx.Request(
                request.method,
                request.url.copy_with(host=str(address)),
                headers=request.headers,  # Host: the name, as httpx set it from the URL
                stream=request.stream,
                extensions={**request.extensions, "sni_hostname": destination.host},
            )
            try:
                return await self._inner.handle_async_request(pinned)
            except httpx.ConnectError as exc:
                unreachable = exc  # nothing was sent: the next address may answer
        raise unreachable

    async def _addresses(self, destination: Destination, request: httpx.Request) -> list[IPAddress]:
        if destination.address is not None:
            return [destination.address]  # a literal, checked with the URL
        host = destination.host
        timeouts = request.extensions.get("timeout", {})
        try:
            async with asyncio.timeout(timeouts.get("connect")):
                found = await self.resolver(host, destination.port)
            addresses = [ip_address(a) for a in found]
        except TimeoutError:
            raise UnresolvedDestinationError(f"resolving {host} timed out") from None
        except (OSError, UnicodeError, ValueError) as exc:
            # UnicodeError: the system resolver's IDNA codec refusing the name.
            raise UnresolvedDestinationError(f"{host} does not resolve: {exc}") from None
        if not addresses:
            raise UnresolvedDestinationError(f"{host} resolves to no address")
        for address in addresses:
            try:
                self.policy.check_address(address)
            except DestinationNotAllowedError as exc:
                raise DestinationNotAllowedError(f"{host} resolves to {address}: {exc}") from None
        return addresses

    async def aclose(self) -> None:
        await self._inner.aclose()


def guarded_client(
    policy: DestinationPolicy = PUBLIC_ONLY, *, resolver: Resolver = system_resolver
) -> httpx.AsyncClient:
    """The client deliveries are sent with: every request through a GuardedTransport."""
    return httpx.AsyncClient(
        transport=GuardedTransport(policy, resolver=resolver),
        trust_env=False,
        follow_redirects=False,
    )
