from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from entryway.chain.endpoints import EndpointPool
from entryway.chain.retry import RetryPolicy


@given(retry=st.integers(min_value=1, max_value=10_000), seed=st.integers())
def test_backoff_stays_between_zero_and_the_capped_doubling(retry: int, seed: int) -> None:
    policy = RetryPolicy(backoff_base_s=0.1, backoff_cap_s=2.0)
    delay = policy.backoff(retry, random.Random(seed))
    assert 0.0 <= delay <= min(2.0, 0.1 * 2 ** min(retry - 1, 64))


def test_writes_are_not_on_the_default_allowlist() -> None:
    policy = RetryPolicy()
    assert policy.is_idempotent(("eth_call", "eth_getLogs", "eth_getTransactionReceipt"))
    assert not policy.is_idempotent(("eth_sendRawTransaction",))
    assert not policy.is_idempotent(("eth_chainId", "eth_sendRawTransaction"))  # a mixed batch
    assert not policy.is_idempotent(("anvil_mine",))  # unknown methods are never repeated


def test_a_policy_needs_an_attempt() -> None:
    with pytest.raises(ValueError, match="at least one attempt"):
        RetryPolicy(attempts=0)


def test_the_pool_prefers_healthy_endpoints_in_the_configured_order() -> None:
    now = [100.0]
    pool = EndpointPool(["http://a", "http://b", "http://c"], cooldown_s=30.0, clock=lambda: now[0])
    a, b, c = pool.endpoints
    pool.failed(a)
    now[0] += 10
    pool.failed(b)
    assert pool.in_order() == [c, a, b]  # failed ones last, the soonest to recover first
    now[0] += 21
    assert pool.in_order() == [a, c, b]  # a rested: first again
    pool.answered(b)
    assert pool.in_order() == [a, b, c]


def test_log_labels_name_the_endpoint_by_its_place_never_its_url() -> None:
    pool = EndpointPool(["https://eth.example/v2/KEY?apikey=K2", "https://u:pw@node:8545/"], 1)
    assert [e.label for e in pool.endpoints] == ["#1", "#2"]
