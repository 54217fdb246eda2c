"""The node outage tracker: one warning when an endpoint goes down, one line when it answers
again, however many calls fail in between; neither names the endpoint's URL."""

from __future__ import annotations

import logging

import pytest

from entryway.chain.outage import NodeOutages


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "entryway.chain"]


def test_an_outage_is_logged_once_and_its_end_once_with_its_length(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [100.0]
    outages = NodeOutages(137, clock=lambda: now[0])
    with caplog.at_level(logging.DEBUG, "entryway.chain"):
        outages.answered(0)  # answering while up is no news
        for _ in range(36):
            outages.failed(0, "ClientConnectorError: Connection refused")
            now[0] += 0.5
        assert outages.is_down(0)
        outages.answered(0)
        outages.answered(0)
    assert lines(caplog) == [
        (
            logging.WARNING,
            "node of chain 137 unreachable at endpoint #1 "
            "(ClientConnectorError: Connection refused); logged again when it answers",
        ),
        (logging.INFO, "node of chain 137 reachable again after 18.0 s (endpoint #1)"),
    ]
    assert not outages.is_down(0)
    assert not any(r.exc_info for r in caplog.records)  # no tracebacks


def test_each_endpoint_has_its_own_outage_and_a_new_outage_is_logged_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    outages = NodeOutages(None, clock=lambda: now[0])
    with caplog.at_level(logging.INFO, "entryway.chain"):
        outages.failed(0, "timed out")
        outages.failed(1, "HTTP 502, no JSON-RPC answer")
        outages.failed(1, "HTTP 502, no JSON-RPC answer")
        now[0] = 2.0
        outages.answered(1)
        outages.failed(1, "HTTP 502, no JSON-RPC answer")  # down again: a new outage
    assert [message for _, message in lines(caplog)] == [
        "node of the chain unreachable at endpoint #1 (timed out); logged again when it answers",
        "node of the chain unreachable at endpoint #2 (HTTP 502, no JSON-RPC answer); "
        "logged again when it answers",
        "node of the chain reachable again after 2.0 s (endpoint #2)",
        "node of the chain unreachable at endpoint #2 (HTTP 502, no JSON-RPC answer); "
        "logged again when it answers",
    ]
    assert outages.is_down(0) and outages.is_down(1)
