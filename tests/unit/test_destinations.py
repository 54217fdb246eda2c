"""Where webhooks may be sent (pure): public http(s) destinations only, whatever spelling the
URL gives a private address; the operator's opt-in lifts the address rules only."""

from __future__ import annotations

import re
import socket
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from entryway.domain.destinations import (
    PRIVATE_ALLOWED,
    PUBLIC_ONLY,
    DestinationNotAllowedError,
    InvalidDestinationError,
    check_destination,
    is_public,
    literal_address,
)
from entryway.domain.special_addresses import (
    IPV4_RANGES,
    IPV6_RANGES,
    SpecialRange,
    special_range,
)
from entryway.domain.webhooks import EndpointNotAllowedError, check_endpoint_url

REFUSED_URLS = [
    "http://127.0.0.1:8080/hooks",
    "http://localhost/hooks",
    "http://LOCALHOST./hooks",
    "http://api.localhost:3000/",
    "http://[::1]/",
    "http://[::]/",
    "http://169.254.169.254/latest/meta-data/",
    "http://0x7f000001:8080/",
    "http://2130706433/",
    "http://0177.0.0.1/",
    "http://127.1/",
    "http://0/",
    "http://user:pass@127.0.0.1/admin",
    "https://user:pass@example.org/hooks",  # credentials, even to a public host
    "https://token@example.org/hooks",
    "http://10.1.2.3/",
    "http://172.16.0.1/",
    "http://192.168.1.1/",
    "http://100.64.0.1/",  # carrier-grade NAT
    "http://0.0.0.0/",
    "http://255.255.255.255/",
    "http://240.0.0.1/",
    "http://224.0.0.1/",
    "http://[ff02::1]/",
    "http://[fe80::1%25eth0]/",
    "http://[fc00::1]/",
    "http://[fd12:3456::1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:a9fe:a9fe]/",  # 169.254.169.254, mapped
    "http://[::127.0.0.1]/",  # IPv4-compatible
    "http://[2002:a00:1::1]/",  # 6to4 of 10.0.0.1
    "http://[64:ff9b::a00:1]/",  # NAT64 of 10.0.0.1
    "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",  # Teredo
    "http://\uff11\uff12\uff17.0.0.1/",  # full-width digits: 127.0.0.1 after NFKC
    "http://127\u30020\u30020\u30021/",  # ideographic full stops
    # IETF protocol assignments and the deprecated 6to4 relay anycast: Python 3.11.7's
    # is_global calls them global (CVE-2024-4032); IANA's registry does not.
    "http://192.0.0.192/k",
    "http://192.0.0.8/",
    "http://192.0.0.170/",
    "http://192.88.99.1/",
    "http://192.0.2.1/",  # documentation
    "http://198.18.0.1/",  # benchmarking
    "http://[::ffff:192.0.0.192]/",
    "http://[64:ff9b::c000:c0]/",  # NAT64 of 192.0.0.192
    "http://[2002:c000:c0::1]/",  # 6to4 of 192.0.0.192
    "http://[64:ff9b:1::808:808]/",  # local-use NAT64: the operator's own translator
    "http://[2001:db8::1]/",  # documentation
    "http://[3fff::1]/",  # documentation (RFC 9637)
    "http://[100::1]/",  # discard-only
    "http://[5f00::1]/",  # SRv6 SIDs
    "http://[2001:2::1]/",  # benchmarking
]

ALLOWED_URLS = [
    "https://example.org/hooks?x=1",
    "http://93.184.216.34:9999/hooks",  # any port on a public address
    "https://[2606:4700:4700::1111]/hooks",
    "http://[::ffff:8.8.8.8]/",  # mapped public IPv4
    "http://[64:ff9b::808:808]/",  # NAT64 of a public IPv4
    "http://[2002:808:808::1]/",  # 6to4 of a public IPv4
    "https://hooks.example.org:8443/in",
    "https://xn--bcher-kva.example/in",
    "https://b\u00fccher.example/in",
    "http://192.0.0.9/",  # PCP anycast: globally reachable inside 192.0.0.0/24
    "http://192.31.196.1/",  # AS112-v4
    "http://[2001:4:112::1]/",  # AS112-v6, inside 2001::/23
]


@pytest.mark.parametrize("url", REFUSED_URLS)
def test_private_loopback_and_credentialed_urls_are_refused(url: str) -> None:
    with pytest.raises(DestinationNotAllowedError):
        check_destination(url)
    with pytest.raises(EndpointNotAllowedError):
        check_endpoint_url(url)


@pytest.mark.parametrize("url", ALLOWED_URLS)
def test_public_destinations_are_allowed(url: str) -> None:
    assert check_endpoint_url(url) == url


def test_the_operators_opt_in_allows_private_addresses_but_never_credentials() -> None:
    for url in ("http://127.0.0.1:8080/hooks", "http://localhost/", "http://[fd00::1]/"):
        check_destination(url, PRIVATE_ALLOWED)
        assert check_endpoint_url(url, PRIVATE_ALLOWED) == url
    with pytest.raises(EndpointNotAllowedError):
        check_endpoint_url("http://user:pass@127.0.0.1/", PRIVATE_ALLOWED)


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.org/",
        "example.org/hooks",
        "http:///nohost",
        "https://a b/",
        "http://a:0/",
        # Names httpx or the resolver cannot encode: they would crash a delivery.
        "http://xn--localhost-:9999/f",
        "http://xn--zz.example/",
        "http://-bad.example/",
        "http://under_score.example/",
        "http://" + "a" * 64 + ".example/",
        "http://" + "a." * 127 + "example/",
        "http://\u2603\u200d.example/",  # a joiner IDNA 2008 disallows there
        "http://%41.example/",
    ],
)
def test_what_is_no_http_url_is_invalid_rather_than_refused(url: str) -> None:
    with pytest.raises(InvalidDestinationError):
        check_destination(url, PRIVATE_ALLOWED)


def test_the_destination_names_host_port_and_a_literal_address() -> None:
    named = check_destination("https://Hooks.Example.org./in")
    assert (named.scheme, named.host, named.port, named.address) == (
        "https",
        "hooks.example.org",
        443,
        None,
    )
    literal = check_destination("http://0x08080808:81/", PUBLIC_ONLY)
    assert (literal.port, literal.address) == (81, IPv4Address("8.8.8.8"))


# --- every spelling of an IPv4 address the resolver accepts -------------------------------

PRIVATE_V4 = [
    IPv4Network(n)
    for n in (
        "127.0.0.0/8",
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "100.64.0.0/10",
        "169.254.0.0/16",
        "0.0.0.0/8",
        "224.0.0.0/4",
        "240.0.0.0/4",
    )
]


@st.composite
def private_v4(draw: st.DrawFn) -> IPv4Address:
    network = draw(st.sampled_from(PRIVATE_V4))
    offset = draw(st.integers(0, network.num_addresses - 1))
    return network[offset]


public_v4 = st.integers(0, 2**32 - 1).map(IPv4Address).filter(is_public)


@st.composite
def number(draw: st.DrawFn, value: int) -> str:
    """`value` in decimal, octal (leading zeros) or hex (either case of 0x and digits)."""
    radix = draw(st.sampled_from(["dec", "oct", "hex"]))
    if radix == "dec":
        return str(value)
    if radix == "oct":
        return "0" * draw(st.integers(1, 3)) + format(value, "o")
    digits = format(value, "x")
    return draw(st.sampled_from(["0x", "0X"])) + draw(st.sampled_from([digits, digits.upper()]))


@st.composite
def ipv4_spelling(draw: st.DrawFn, address: IPv4Address) -> str:
    """One of the forms inet_aton reads: a.b.c.d, a.b.c (16-bit tail), a.b (24-bit tail), or
    one 32-bit number, each part in its own radix."""
    n = int(address)
    octets = [(n >> s) & 0xFF for s in (24, 16, 8, 0)]
    parts = draw(st.sampled_from([4, 3, 2, 1]))
    values = {
        4: octets,
        3: [*octets[:2], n & 0xFFFF],
        2: [octets[0], n & 0xFFFFFF],
        1: [n],
    }[parts]
    return ".".join([draw(number(v)) for v in values])


@st.composite
def ipv6_carrying(draw: st.DrawFn, address: IPv4Address) -> str:
    """An IPv6 form that reaches (or names) `address`: mapped, compatible, 6to4, NAT64."""
    n = int(address)
    high, low = f"{n >> 16:x}", f"{n & 0xFFFF:x}"
    tail = draw(st.integers(0, 0xFFFF))
    return draw(
        st.sampled_from(
            [
                f"[::ffff:{address}]",
                f"[::ffff:{high}:{low}]",
                f"[::{address}]",
                f"[2002:{high}:{low}::{tail:x}]",
                f"[64:ff9b::{address}]",
                f"[64:ff9b::{high}:{low}]",
            ]
        )
    )


@given(st.data())
def test_a_private_ipv4_address_is_refused_in_every_spelling(data: st.DataObject) -> None:
    address = data.draw(private_v4())
    host = data.draw(ipv4_spelling(address))
    # The spelling is one the system's resolver reads as this very address...
    assert IPv4Address(socket.inet_aton(host)) == address
    assert literal_address(host) == address
    # ...and the check refuses it, on any port and path.
    port = data.draw(st.integers(1, 65535))
    with pytest.raises(DestinationNotAllowedError):
        check_destination(f"http://{host}:{port}/hooks")


@given(st.data())
def test_an_ipv6_form_of_a_private_ipv4_address_is_refused(data: st.DataObject) -> None:
    address = data.draw(private_v4())
    host = data.draw(ipv6_carrying(address))
    assert not is_public(ip_address(host.strip("[]")))
    with pytest.raises(DestinationNotAllowedError):
        check_destination(f"https://{host}/hooks")


@given(st.data())
def test_a_public_ipv4_address_passes_in_every_spelling_the_client_can_send_to(
    data: st.DataObject,
) -> None:
    address = data.draw(public_v4)
    host = data.draw(ipv4_spelling(address))
    url = f"http://{host}/hooks"
    if re.fullmatch(r"[0-9]+(\.[0-9]+){3}", host) and host != str(address):
        # Four decimal-looking parts with a leading zero (octal to inet_aton): httpx refuses
        # to send to it, so it is refused when registered rather than failing every delivery.
        with pytest.raises(InvalidDestinationError):
            check_destination(url)
        with pytest.raises(httpx.InvalidURL):
            httpx.URL(url)
        return
    destination = check_destination(url)
    assert destination.address == address
    assert httpx.URL(url).host  # the client takes it too


GLOBAL_UNICAST = IPv6Network("2000::/3")
WRAPPING = [IPv6Network("::ffff:0:0/96"), IPv6Network("64:ff9b::/96")]


@given(st.integers(0, 2**128 - 1).map(IPv6Address))
def test_an_ipv6_address_passes_only_if_global_unicast(address: IPv6Address) -> None:
    url = f"http://[{address}]/"
    outcome = is_public(address)
    if outcome:
        check_destination(url)
        assert address in GLOBAL_UNICAST or any(address in n for n in WRAPPING)
        assert address not in IPv6Network("2001:db8::/32")
    else:
        with pytest.raises(DestinationNotAllowedError):
            check_destination(url)


@pytest.mark.parametrize("entry", IPV4_RANGES + IPV6_RANGES, ids=lambda r: str(r.network))
def test_each_registry_entry_judges_the_addresses_it_holds_most_specifically(
    entry: SpecialRange,
) -> None:
    for address in (entry.network[0], entry.network[-1]):
        if special_range(address) is not entry or entry.carries_ipv4:
            continue  # a more specific entry decides, or the IPv4 address inside does
        assert is_public(address) is entry.globally_reachable, (address, entry.name)


@given(st.integers(0, 255))
def test_ietf_protocol_assignments_are_refused_but_the_two_anycast_services(last: int) -> None:
    address = IPv4Address(f"192.0.0.{last}")
    assert is_public(address) is (last in (9, 10))
    assert is_public(IPv6Address(f"::ffff:{address}")) is (last in (9, 10))


def test_teredo_is_judged_by_its_server_and_its_client() -> None:
    # Server 65.54.227.120 (public); client 192.0.2.45 or 8.8.8.8, stored inverted.
    documentation_client = IPv6Address("2001:0:4136:e378:8000:63bf:3fff:fdd2")
    public_client = IPv6Address("2001:0:4136:e378:8000:63bf:f7f7:f7f7")
    assert documentation_client.teredo is not None and public_client.teredo is not None
    assert not is_public(documentation_client)
    assert is_public(public_client)


def test_names_that_only_look_numeric_are_names() -> None:
    for host in ("cafe.be", "add.fed", "0xdeadbeef.example", "1e100.net", "08.0.0.1"):
        assert literal_address(host) is None
    assert literal_address("1.2.3.4 junk") is None  # C inet_aton would stop at the space


@given(
    st.one_of(
        st.text(max_size=60),
        st.builds(
            "{}://{}/".format,
            st.sampled_from(["http", "https"]),
            st.text(alphabet="[]:%@.0x7fF\u3002\uff10abc-/?#", max_size=30),
        ),
    )
)
def test_any_text_is_a_destination_or_a_refusal_never_a_crash(url: str) -> None:
    try:
        destination = check_destination(url)
    except DestinationNotAllowedError:
        return
    assert destination.scheme in ("http", "https") and 1 <= destination.port <= 65535
    assert destination.address is None or is_public(destination.address)


LABEL_TEXT = st.text(
    alphabet="abxn-09\u00df\u00fc\u200d\u0301\u0391\u3002\uff0e", min_size=1, max_size=12
)


@given(st.lists(LABEL_TEXT, min_size=1, max_size=4), st.booleans())
def test_every_name_accepted_is_one_the_http_client_can_send_to(
    labels: list[str], root: bool
) -> None:
    """A name accepted at registration never fails in httpx at delivery (an `xn--` label
    that is no A-label, a label not in NFC, a disallowed joiner...)."""
    url = "https://" + ".".join(labels) + ("." if root else "") + "/in"
    try:
        check_destination(url, PRIVATE_ALLOWED)
    except DestinationNotAllowedError:
        return
    assert httpx.Request("POST", url).url.host
