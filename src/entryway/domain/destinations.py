"""Where the service may send a tenant's HTTP requests (webhook deliveries), pure.

A tenant chooses the URL, so a URL naming a loopback, private or link-local address would let
it make the service reach internal services (and, from the answers, map them). By default a
destination must be public: an http(s) URL without credentials whose address is globally
reachable unicast by IANA's special-purpose address registries
(entryway.domain.special_addresses). A host that is a name must be one DNS can carry and the
HTTP client can encode as written (IDNA 2008), so that no stored URL can fail a delivery
before it starts. The host is judged twice: here when the URL is registered (literal
addresses in any spelling a resolver accepts, and the `localhost` names), and again at
delivery on every address DNS gives, just before connecting to one of them (see
entryway.worker.destinations). `DestinationPolicy(allow_private=True)` lifts the address rules
for operators whose receivers live on their own network.

Ports: any, 1 to 65535. What keeps internal services out of reach is the address rule; on a
public address the port is the receiver's own business.
"""

from __future__ import annotations

import re
import socket
import unicodedata
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address, ip_address
from urllib.parse import urlsplit

import idna

from entryway.domain.special_addresses import is_globally_reachable
from entryway.errors import EntrywayError

IPAddress = IPv4Address | IPv6Address

NOT_ALLOWED = "destination not allowed"
ALLOWED_SCHEMES = ("http", "https")

# What inet_aton reads as an IPv4 address: one to four parts, each decimal, octal (leading 0)
# or hex (0x). Only strings made of these characters go to inet_aton, whose C version stops at
# the first space and would accept "1.2.3.4 anything".
_IPV4_SPELLING = re.compile(r"[0-9a-fx.]+", re.IGNORECASE)
# Full stops IDNA treats as label separators, as a resolver given the name would.
_DOTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})
_DOTTED_QUAD = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+")
_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")  # RFC 1123 section 2.1, lower case
_LOOPBACK_NAMES = ("localhost", ".localhost")  # RFC 6761: always the loopback address


class DestinationNotAllowedError(EntrywayError):
    """The URL may not receive requests from the service (its address, credentials or
    scheme)."""


class InvalidDestinationError(DestinationNotAllowedError):
    """Not an absolute http(s) URL at all."""


@dataclass(frozen=True, slots=True)
class DestinationPolicy:
    allow_private: bool = False  # loopback, private, link-local ... allowed too

    def check_address(self, address: IPAddress) -> None:
        if not self.allow_private and not is_public(address):
            raise DestinationNotAllowedError(f"{NOT_ALLOWED}: not a public address")


PUBLIC_ONLY = DestinationPolicy()
PRIVATE_ALLOWED = DestinationPolicy(allow_private=True)


@dataclass(frozen=True, slots=True)
class Destination:
    scheme: str
    host: str  # lower case, IDNA dots folded, no trailing dot, no brackets
    port: int
    address: IPAddress | None  # when the host is an address literal: no DNS to ask


def check_destination(url: str, policy: DestinationPolicy = PUBLIC_ONLY) -> Destination:
    """The URL's destination if the policy lets the service send to it, else
    DestinationNotAllowedError (InvalidDestinationError when it is no http(s) URL)."""
    if any(c.isspace() or ord(c) < 0x21 or ord(c) == 0x7F for c in url):
        raise InvalidDestinationError("the URL contains whitespace or control characters")
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unclosed [ in the host
        raise InvalidDestinationError("the URL cannot be parsed") from None
    scheme = parts.scheme.lower()
    if scheme not in ALLOWED_SCHEMES or not parts.hostname:
        raise InvalidDestinationError("the URL must be an absolute http:// or https:// URL")
    try:
        given = parts.port
    except ValueError:
        given = 0
    if given == 0:
        raise InvalidDestinationError("the URL's port is not a number from 1 to 65535")
    port = given or (443 if scheme == "https" else 80)
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise DestinationNotAllowedError(f"{NOT_ALLOWED}: the URL must not carry credentials")
    host = normal_host(parts.hostname)
    address = literal_address(host)
    if address is not None:
        policy.check_address(address)
        if _DOTTED_QUAD.fullmatch(host) and not _canonical_ipv4(host):
            # inet_aton reads 8.8.8.010 as 8.8.8.8; the HTTP client refuses to send to it.
            raise InvalidDestinationError("the URL's host is not a valid IPv4 address")
    elif not (is_host_name(host) and is_host_name(parts.hostname.removesuffix("."))):
        # The name as written must pass too: the HTTP client encodes it unnormalised.
        raise InvalidDestinationError("the URL's host is not a valid host name")
    elif not policy.allow_private and (host == "localhost" or host.endswith(_LOOPBACK_NAMES)):
        raise DestinationNotAllowedError(f"{NOT_ALLOWED}: a loopback name")
    return Destination(scheme, host, port, address)


def normal_host(host: str) -> str:
    """The host as a resolver sees it: compatibility forms folded (full-width digits are
    digits), IDNA's other full stops as dots, lower case, without the root's trailing dot."""
    folded = unicodedata.normalize("NFKC", host).translate(_DOTS).lower()
    return folded.strip("[]").removesuffix(".")


def is_host_name(host: str) -> bool:
    """A name DNS can carry and an HTTP client will encode: letters, digits and hyphens in
    labels of 1 to 63 characters (no hyphen first or last), 253 characters in all, after
    IDNA 2008 turns a Unicode name into A-labels; and every `xn--` label a valid A-label.
    Anything else fails at delivery (httpx decodes `xn--` labels, the resolver encodes),
    so it is refused when registered."""
    try:
        ascii_host = host if host.isascii() else idna.encode(host).decode("ascii")
        if "xn--" in ascii_host:
            idna.decode(ascii_host)
    except (UnicodeError, ValueError):  # idna.IDNAError is a UnicodeError
        return False
    return len(ascii_host) <= 253 and all(
        _LABEL.fullmatch(label) for label in ascii_host.split(".")
    )


def _canonical_ipv4(host: str) -> bool:
    try:
        IPv4Address(host)
    except ValueError:
        return False
    return True


def literal_address(host: str) -> IPAddress | None:
    """The address `host` spells without DNS: an IPv6 literal, or IPv4 in every form the
    system resolver accepts (inet_aton: `127.1`, `2130706433`, `0x7f000001`, `0177.0.0.1`)."""
    try:
        return ip_address(host)
    except ValueError:
        pass
    if not _IPV4_SPELLING.fullmatch(host):
        return None
    try:
        return IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def is_public(address: IPAddress) -> bool:
    """Globally reachable unicast by IANA's special-purpose registries, and so is every IPv4
    address an IPv6 form carries (mapped, NAT64, 6to4, Teredo): see
    entryway.domain.special_addresses. Python's `is_global` is not asked: its tables change
    between releases and have called private ranges global (CVE-2024-4032)."""
    return is_globally_reachable(address)
