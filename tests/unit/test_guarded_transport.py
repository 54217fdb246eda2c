"""The delivery transport (no network: a scripted resolver and a recording inner transport):
the name is resolved once, every address checked, and the request sent to a checked address
with the name kept for Host and TLS; anything refused reaches no connection."""

from __future__ import annotations

from collections.abc import Sequence

import httpx
import pytest

from entryway.domain.destinations import (
    PRIVATE_ALLOWED,
    DestinationNotAllowedError,
    DestinationPolicy,
)
from entryway.errors import ConfigurationError
from entryway.worker.destinations import (
    GuardedTransport,
    UnresolvedDestinationError,
    destination_policy_from_env,
)


class Dns:
    """Answers from a script, one answer per lookup (a rebinding name answers differently
    the second time), and counts lookups."""

    def __init__(self, *answers: Sequence[str]) -> None:
        self.answers = list(answers)
        self.lookups: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.lookups.append((host, port))
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


class Network:
    """Stands for the sockets: records each request sent, refuses connections to `down`."""

    def __init__(self, down: Sequence[str] = ()) -> None:
        self.sent: list[httpx.Request] = []
        self.down = set(down)

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.host in self.down:
            raise httpx.ConnectError("connection refused", request=request)
        self.sent.append(request)
        return httpx.Response(204)


def client(
    dns: Dns, network: Network, policy: DestinationPolicy | None = None
) -> httpx.AsyncClient:
    transport = GuardedTransport(
        policy or DestinationPolicy(), resolver=dns, inner=httpx.MockTransport(network.handle)
    )
    return httpx.AsyncClient(transport=transport)


async def test_the_request_goes_to_the_checked_address_under_its_name() -> None:
    dns, network = Dns(["93.184.216.34"], ["127.0.0.1"]), Network()
    async with client(dns, network) as http:
        answer = await http.post("https://hooks.example.org:8443/in?x=1", content=b"{}")
    assert answer.status_code == 204
    [sent] = network.sent
    assert str(sent.url) == "https://93.184.216.34:8443/in?x=1"
    assert sent.headers["host"] == "hooks.example.org:8443"
    assert sent.extensions["sni_hostname"] == "hooks.example.org"  # TLS checks the name
    assert dns.lookups == [("hooks.example.org", 8443)]  # once: no second answer is used


async def test_a_name_resolving_to_a_private_address_reaches_nothing() -> None:
    for answer in (
        ["127.0.0.1"],
        ["93.184.216.34", "10.0.0.7"],
        ["::1"],
        ["169.254.169.254"],
        ["192.0.0.192"],
        ["192.88.99.1"],
        ["93.184.216.34", "::ffff:192.0.0.8"],
    ):
        dns, network = Dns(answer), Network()
        async with client(dns, network) as http:
            with pytest.raises(DestinationNotAllowedError):
                await http.post("http://hooks.example.org/in", content=b"{}")
        assert network.sent == [] and len(dns.lookups) == 1


async def test_literals_and_credentials_are_refused_without_asking_dns() -> None:
    dns, network = Dns(["93.184.216.34"]), Network()
    async with client(dns, network) as http:
        for url in ("http://0x7f000001:8080/", "http://[::ffff:10.0.0.1]/", "http://u:p@a.org/"):
            with pytest.raises(DestinationNotAllowedError):
                await http.post(url, content=b"{}")
    assert network.sent == [] and dns.lookups == []


async def test_an_address_refusing_connections_hands_over_to_the_next_checked_one() -> None:
    dns, network = Dns(["2606:4700::1111", "93.184.216.34"]), Network(down=["2606:4700::1111"])
    async with client(dns, network) as http:
        assert (await http.post("http://hooks.example.org/", content=b"{}")).status_code == 204
    assert [r.url.host for r in network.sent] == ["93.184.216.34"]
    dns, network = Dns(["93.184.216.34"]), Network(down=["93.184.216.34"])
    async with client(dns, network) as http:
        with pytest.raises(httpx.ConnectError):
            await http.post("http://hooks.example.org/", content=b"{}")


async def test_the_operators_opt_in_lets_private_addresses_through() -> None:
    dns, network = Dns(["127.0.0.1"]), Network()
    async with client(dns, network, PRIVATE_ALLOWED) as http:
        assert (await http.post("http://receiver.internal:9000/", content=b"{}")).status_code == 204
    assert [str(r.url) for r in network.sent] == ["http://127.0.0.1:9000/"]


async def test_a_name_without_an_address_is_refused_like_a_forbidden_one() -> None:
    """Unknown, unencodable or slow to resolve: the same refusal as a name resolving to
    loopback, so a tenant cannot tell internal names from unknown ones."""

    async def unknown(host: str, port: int) -> Sequence[str]:
        raise OSError("Name or service not known")

    async def unencodable(host: str, port: int) -> Sequence[str]:
        raise UnicodeError("label empty or too long")  # the stdlib IDNA codec's complaint

    async def nothing(host: str, port: int) -> Sequence[str]:
        return []

    async def garbage(host: str, port: int) -> Sequence[str]:
        return ["not an address"]

    for resolver in (unknown, unencodable, nothing, garbage):
        network = Network()
        transport = GuardedTransport(resolver=resolver, inner=httpx.MockTransport(network.handle))
        async with httpx.AsyncClient(transport=transport) as http:
            with pytest.raises(UnresolvedDestinationError, match=r"nowhere\.example\.org"):
                await http.post("http://nowhere.example.org/", content=b"{}")
        assert network.sent == []
    assert issubclass(UnresolvedDestinationError, DestinationNotAllowedError)


async def test_a_refusal_after_dns_names_the_address_for_the_operators_log() -> None:
    dns, network = Dns(["192.0.0.192"]), Network()  # global by Python 3.11.7's tables
    async with client(dns, network) as http:
        with pytest.raises(DestinationNotAllowedError, match=r"resolves to 192\.0\.0\.192"):
            await http.post("http://hooks.example.org/in", content=b"{}")
    assert network.sent == []


def test_the_opt_in_reads_true_or_false_and_nothing_else() -> None:
    name = "ENTRYWAY_WEBHOOK_ALLOW_PRIVATE"
    assert destination_policy_from_env({}).allow_private is False
    assert destination_policy_from_env({name: "false"}).allow_private is False
    assert destination_policy_from_env({name: "TRUE"}).allow_private is True
    assert destination_policy_from_env({name: "1"}).allow_private is True
    with pytest.raises(ConfigurationError):
        destination_policy_from_env({name: "maybe"})
