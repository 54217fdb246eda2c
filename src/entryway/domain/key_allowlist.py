"""Where an API key may be used from: an optional allowlist of browser origins (the request's
`Origin`) and one of client addresses (IP addresses or networks, CIDR). An empty list allows
everything; a set list refuses whatever it does not name, a request without an `Origin`
included when origins are listed."""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass
from urllib.parse import urlsplit

MAX_ENTRIES = 50
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class AllowlistError(ValueError):
    """An entry that is not an origin or an IP address or network."""


def origin(value: str) -> str:
    """`scheme://host[:port]`, lower-case, as browsers send it in `Origin`."""
    parts = urlsplit(value.strip().lower())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise AllowlistError(
            f"{value!r} is not an origin: scheme://host[:port], e.g. https://app.example.com"
        )
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        raise AllowlistError(f"{value!r} is not an origin: no path, query or credentials")
    return f"{parts.scheme}://{parts.netloc}"


def network(value: str) -> str:
    """An IP address or network (CIDR), in its canonical spelling."""
    try:
        return str(ipaddress.ip_network(value.strip(), strict=False))
    except ValueError:
        raise AllowlistError(f"{value!r} is not an IP address or network (CIDR)") from None


@dataclass(frozen=True, slots=True)
class KeyAllowlist:
    origins: tuple[str, ...] = ()
    client_addresses: tuple[str, ...] = ()

    @classmethod
    def of(cls, origins: list[str], client_addresses: list[str]) -> KeyAllowlist:
        if len(origins) > MAX_ENTRIES or len(client_addresses) > MAX_ENTRIES:
            raise AllowlistError(f"at most {MAX_ENTRIES} origins and {MAX_ENTRIES} addresses")
        return cls(
            tuple(dict.fromkeys(origin(o) for o in origins)),
            tuple(dict.fromkeys(network(a) for a in client_addresses)),
        )

    def refusal(self, request_origin: str | None, client: str | None) -> tuple[str, str] | None:
        """(code, detail) when the request may not use the key from where it comes; else None."""
        if self.origins:
            if request_origin is None:
                return (
                    "origin_not_allowed",
                    "this key is limited to listed origins: the request has no Origin",
                )
            try:
                given = origin(request_origin)
            except AllowlistError:
                given = request_origin
            if given not in self.origins:
                return (
                    "origin_not_allowed",
                    f"origin {request_origin} is not on this key's allowlist",
                )
        if self.client_addresses and not _listed(client, self.client_addresses):
            return (
                "client_not_allowed",
                f"client address {client} is not on this key's allowlist",
            )
        return None

    def to_columns(self) -> dict[str, str | None]:
        return {
            "allowed_origins": json.dumps(list(self.origins)) if self.origins else None,
            "allowed_clients": json.dumps(list(self.client_addresses))
            if self.client_addresses
            else None,
        }

    @classmethod
    def from_columns(cls, origins: str | None, clients: str | None) -> KeyAllowlist:
        return cls(tuple(json.loads(origins or "[]")), tuple(json.loads(clients or "[]")))


ANYWHERE = KeyAllowlist()  # no list: any origin, any client address


def _listed(client: str | None, networks: tuple[str, ...]) -> bool:
    if client is None:
        return False
    try:
        address = ipaddress.ip_address(client)
    except ValueError:
        return False
    return any(address in ipaddress.ip_network(n) for n in networks)
