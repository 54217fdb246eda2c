"""Who may read /metrics, in every process: a client on this host with no proxy's
forwarding header, or anyone presenting one of the tokens."""

from __future__ import annotations

import pytest
from starlette.requests import Request

from entryway.service.scrape_access import may_scrape

TOKENS = ("metrics-token", None)


def request(client: str, **headers: str) -> Request:
    raw = [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()]
    return Request({"type": "http", "client": (client, 40000), "headers": raw})


@pytest.mark.parametrize("client", ["127.0.0.1", "::1"])
def test_a_scraper_on_this_host_needs_no_token(client: str) -> None:
    assert may_scrape(request(client), TOKENS)


@pytest.mark.parametrize("header", ["forwarded", "x_forwarded_for", "x_real_ip"])
def test_a_proxied_request_is_not_local(header: str) -> None:
    assert not may_scrape(request("127.0.0.1", **{header: "203.0.113.9"}), TOKENS)


def test_another_host_needs_one_of_the_tokens() -> None:
    assert not may_scrape(request("203.0.113.9"), TOKENS)
    assert not may_scrape(request("203.0.113.9", authorization="Bearer not-it"), TOKENS)
    assert not may_scrape(request("203.0.113.9", authorization="Bearer "), TOKENS)
    assert may_scrape(request("203.0.113.9", authorization="Bearer metrics-token"), TOKENS)
    assert may_scrape(request("203.0.113.9", authorization="bearer metrics-token"), TOKENS)
