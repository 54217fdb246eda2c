"""The verdicts on an RPC endpoint's head and stability, from measured figures."""

from __future__ import annotations

import pytest

from entryway.deploy.rpc_health import (
    Probe,
    RpcHealthThresholds,
    head_freshness,
    stability,
)

LIMITS = RpcHealthThresholds()


def test_a_head_within_the_block_times_allowed_is_fresh() -> None:
    assert head_freshness(100, 59.0, 2.0, LIMITS).ok
    assert head_freshness(100, 60.0, 2.0, LIMITS).ok
    stale = head_freshness(100, 61.0, 2.0, LIMITS)
    assert not stale.ok
    assert stale.detail == (
        "latest block 100 is 61 s old; block time 2 s, stale after 60 s (30 blocks)"
    )


def test_the_head_limit_follows_the_block_time() -> None:
    assert head_freshness(1, 300.0, 12.0, LIMITS).ok  # 30 Ethereum slots: 360 s
    assert not head_freshness(1, 300.0, 2.0, LIMITS).ok


def test_a_node_clock_ahead_of_ours_is_not_negative_age() -> None:
    verdict = head_freshness(7, -3.0, 2.0, LIMITS)
    assert verdict.ok and "is 0 s old" in verdict.detail


def test_every_probe_answered_in_time_is_stable() -> None:
    probes = [Probe(10, 5), Probe(30, 6), Probe(20, 6)]
    verdict = stability(probes, RpcHealthThresholds(probes=3))
    assert verdict.ok
    assert "3/3 probes answered over 1 s" in verdict.detail
    assert "latency median 20 ms, max 30 ms (limit 2000 ms)" in verdict.detail
    assert "head 5 to 6" in verdict.detail


def test_failures_beyond_the_limit_are_unstable() -> None:
    probes = [Probe(10, 5), Probe(5000, None, "timed out"), Probe(12, 5)]
    assert not stability(probes, LIMITS).ok
    verdict = stability(probes, RpcHealthThresholds(max_failures=1))
    assert verdict.ok and "failures 1 (limit 1)" in verdict.detail
    assert "errors: timed out" in verdict.detail


def test_one_slow_answer_is_unstable() -> None:
    probes = [Probe(10, 5), Probe(2_001, 5)]
    assert not stability(probes, LIMITS).ok
    assert stability(probes, RpcHealthThresholds(max_latency_ms=2_001)).ok


def test_no_answer_at_all_is_unstable_whatever_the_limit() -> None:
    probes = [Probe(5, None, "refused")]
    assert not stability(probes, RpcHealthThresholds(max_failures=5)).ok


@pytest.mark.parametrize(
    "bad",
    [
        {"probes": 0},
        {"max_failures": -1},
        {"max_head_age_blocks": 0},
        {"probe_interval_s": -1.0},
        {"max_latency_ms": 0},
    ],
)
def test_thresholds_that_cannot_be_met_are_refused(bad: dict[str, int | float]) -> None:
    with pytest.raises(ValueError):
        RpcHealthThresholds(**bad)  # type: ignore[arg-type]
