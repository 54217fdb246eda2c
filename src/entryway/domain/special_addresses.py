"""Which IP addresses are globally reachable unicast, from IANA's registries, pure.

Python's `ipaddress` answers `is_global` from tables that differ between releases and have
been wrong (before 3.11.10 / 3.12.4 it called all of 192.0.0.0/24 global, CVE-2024-4032), so
the service keeps its own copy of the IANA IPv4 and IPv6 Special-Purpose Address Registries
(https://www.iana.org/assignments/iana-ipv4-special-registry,
https://www.iana.org/assignments/iana-ipv6-special-registry, as of 2025), plus the multicast
blocks and, for IPv6, the one block IANA allocates for global unicast (2000::/3).

An address is judged by the most specific range holding it: 192.0.0.9 (PCP anycast, globally
reachable) inside 192.0.0.0/24 (IETF protocol assignments, not). Ranges that wrap an IPv4
address (IPv4-mapped, NAT64's well-known prefix, 6to4, Teredo) are judged by every IPv4 address
they carry instead, so a public-looking IPv6 form cannot reach a private IPv4 host. Where IANA
says "N/A" the range is not treated as reachable.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network

IPAddress = IPv4Address | IPv6Address


@dataclass(frozen=True, slots=True)
class SpecialRange:
    network: IPv4Network | IPv6Network
    name: str
    rfc: str
    globally_reachable: bool
    carries_ipv4: bool = False  # judged by the IPv4 address(es) inside, not by this entry


def _v4(cidr: str, name: str, rfc: str, reachable: bool) -> SpecialRange:
    return SpecialRange(IPv4Network(cidr), name, rfc, reachable)


def _v6(cidr: str, name: str, rfc: str, reachable: bool, carries: bool = False) -> SpecialRange:
    return SpecialRange(IPv6Network(cidr), name, rfc, reachable, carries)


IPV4_RANGES: tuple[SpecialRange, ...] = (
    _v4("0.0.0.0/0", "unicast (not special-purpose)", "RFC 791", True),
    _v4("0.0.0.0/8", "This network", "RFC 791", False),
    _v4("0.0.0.0/32", "This host on this network", "RFC 1122", False),
    _v4("10.0.0.0/8", "Private-Use", "RFC 1918", False),
    _v4("100.64.0.0/10", "Shared Address Space", "RFC 6598", False),
    _v4("127.0.0.0/8", "Loopback", "RFC 1122", False),
    _v4("169.254.0.0/16", "Link Local", "RFC 3927", False),
    _v4("172.16.0.0/12", "Private-Use", "RFC 1918", False),
    _v4("192.0.0.0/24", "IETF Protocol Assignments", "RFC 6890", False),
    _v4("192.0.0.0/29", "IPv4 Service Continuity Prefix", "RFC 7335", False),
    _v4("192.0.0.8/32", "IPv4 dummy address", "RFC 7600", False),
    _v4("192.0.0.9/32", "Port Control Protocol Anycast", "RFC 7723", True),
    _v4("192.0.0.10/32", "Traversal Using Relays around NAT Anycast", "RFC 8155", True),
    _v4("192.0.0.170/32", "NAT64/DNS64 Discovery", "RFC 8880", False),
    _v4("192.0.0.171/32", "NAT64/DNS64 Discovery", "RFC 8880", False),
    _v4("192.0.2.0/24", "Documentation (TEST-NET-1)", "RFC 5737", False),
    _v4("192.31.196.0/24", "AS112-v4", "RFC 7535", True),
    _v4("192.52.193.0/24", "AMT", "RFC 7450", True),
    _v4("192.88.99.0/24", "Deprecated (6to4 Relay Anycast)", "RFC 7526", False),
    _v4("192.88.99.2/32", "6a44-relay anycast address", "RFC 6751", False),
    _v4("192.168.0.0/16", "Private-Use", "RFC 1918", False),
    _v4("192.175.48.0/24", "Direct Delegation AS112 Service", "RFC 7534", True),
    _v4("198.18.0.0/15", "Benchmarking", "RFC 2544", False),
    _v4("198.51.100.0/24", "Documentation (TEST-NET-2)", "RFC 5737", False),
    _v4("203.0.113.0/24", "Documentation (TEST-NET-3)", "RFC 5737", False),
    _v4("224.0.0.0/4", "Multicast (IPv4 Multicast Address Space Registry)", "RFC 5771", False),
    _v4("240.0.0.0/4", "Reserved", "RFC 1112", False),
    _v4("255.255.255.255/32", "Limited Broadcast", "RFC 919", False),
)

IPV6_RANGES: tuple[SpecialRange, ...] = (
    _v6("::/0", "not allocated for global unicast", "RFC 4291", False),
    _v6("::/128", "Unspecified Address", "RFC 4291", False),
    _v6("::1/128", "Loopback Address", "RFC 4291", False),
    _v6("::/96", "IPv4-Compatible (deprecated)", "RFC 4291", False),
    _v6("::ffff:0:0/96", "IPv4-mapped Address", "RFC 4291", False, carries=True),
    _v6("64:ff9b::/96", "IPv4-IPv6 Translation", "RFC 6052", True, carries=True),
    _v6("64:ff9b:1::/48", "IPv4-IPv6 Translation (local use)", "RFC 8215", False),
    _v6("100::/64", "Discard-Only Address Block", "RFC 6666", False),
    _v6("100:0:0:1::/64", "Dummy IPv6 Prefix", "RFC 9780", False),
    _v6("2000::/3", "Global Unicast (IPv6 Address Space Registry)", "RFC 4291", True),
    _v6("2001::/23", "IETF Protocol Assignments", "RFC 2928", False),
    _v6("2001::/32", "TEREDO", "RFC 4380", False, carries=True),
    _v6("2001:1::1/128", "Port Control Protocol Anycast", "RFC 7723", True),
    _v6("2001:1::2/128", "Traversal Using Relays around NAT Anycast", "RFC 8155", True),
    _v6("2001:1::3/128", "DNS-SD Service Registration Protocol Anycast", "RFC 9665", True),
    _v6("2001:2::/48", "Benchmarking", "RFC 5180", False),
    _v6("2001:3::/32", "AMT", "RFC 7450", True),
    _v6("2001:4:112::/48", "AS112-v6", "RFC 7535", True),
    _v6("2001:10::/28", "Deprecated (previously ORCHID)", "RFC 4843", False),
    _v6("2001:20::/28", "ORCHIDv2", "RFC 7343", True),
    _v6("2001:30::/28", "Drone Remote ID Protocol Entity Tags (DETs)", "RFC 9374", True),
    _v6("2001:db8::/32", "Documentation", "RFC 3849", False),
    _v6("2002::/16", "6to4", "RFC 3056", False, carries=True),
    _v6("2620:4f:8000::/48", "Direct Delegation AS112 Service", "RFC 7534", True),
    _v6("3fff::/20", "Documentation", "RFC 9637", False),
    _v6("5f00::/16", "Segment Routing (SRv6) SIDs", "RFC 9602", False),
    _v6("fc00::/7", "Unique-Local", "RFC 4193", False),
    _v6("fe80::/10", "Link-Local Unicast", "RFC 4291", False),
    _v6("ff00::/8", "Multicast (IPv6 Multicast Address Space Registry)", "RFC 4291", False),
)

# Most specific first, so the first range holding an address is the one that judges it.
_V4_BY_PREFIX = sorted(IPV4_RANGES, key=lambda r: -r.network.prefixlen)
_V6_BY_PREFIX = sorted(IPV6_RANGES, key=lambda r: -r.network.prefixlen)


def special_range(address: IPAddress) -> SpecialRange:
    """The most specific registry range holding `address` (every address is in one)."""
    ranges = _V4_BY_PREFIX if isinstance(address, IPv4Address) else _V6_BY_PREFIX
    return next(r for r in ranges if address in r.network)


def carried_ipv4(address: IPv6Address) -> tuple[IPv4Address, ...]:
    """The IPv4 addresses an IPv6 address wraps: mapped, NAT64 (RFC 6052 well-known prefix),
    6to4 (RFC 3056) and Teredo (RFC 4380: server and client); none for other addresses."""
    if address.ipv4_mapped is not None:
        return (address.ipv4_mapped,)
    if address in IPv6Network("64:ff9b::/96"):
        return (IPv4Address(int(address) & 0xFFFF_FFFF),)
    if address.sixtofour is not None:
        return (address.sixtofour,)
    if address.teredo is not None:
        return address.teredo
    return ()


def is_globally_reachable(address: IPAddress) -> bool:
    """Globally reachable unicast by the registries above; for an IPv6 form wrapping IPv4
    addresses, only if every address it wraps is."""
    found = special_range(address)
    if found.carries_ipv4 and isinstance(address, IPv6Address):
        carried = carried_ipv4(address)
        return bool(carried) and all(is_globally_reachable(v4) for v4 in carried)
    return found.globally_reachable
