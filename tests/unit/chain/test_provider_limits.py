"""Reading providers' refusals: which errors are a log-range cap, a batch cap, a method or
tag not served, and what a Retry-After asks; and the caps learned from them."""

from __future__ import annotations

import email.utils
import time

import pytest
from pydantic import ValidationError

from entryway.chain.limits import BatchCap, LogRange, is_range_refusal, refusal
from entryway.chain.transport import retry_after_seconds
from entryway.chain.unserved import is_unserved
from entryway.settings.model import ChainSettings

# As providers word them (their documentation and error pages).
RANGE_REFUSALS = [
    "query returned more than 10000 results",
    "Log response size exceeded. You can make eth_getLogs requests with up to a 2K block "
    "range and no limit on the response size",
    "eth_getLogs is limited to a 10,000 range",
    "block range is too wide",
    "exceed maximum block range: 50000",
    "block range too large: eth_getLogs is limited to a 2000 block range",
]
OTHER_ERRORS = [
    "execution reverted",
    "header not found",
    "rate limit exceeded",
    "invalid argument 0",
]


@pytest.mark.parametrize("message", RANGE_REFUSALS)
def test_range_refusals_are_recognised(message: str) -> None:
    assert is_range_refusal(message)


@pytest.mark.parametrize("message", OTHER_ERRORS)
def test_other_errors_are_not_range_refusals(message: str) -> None:
    assert not is_range_refusal(message)


def test_a_log_range_halves_and_never_grows() -> None:
    span = LogRange()
    assert span.size(10_000) == 10_000
    assert span.refused(10_000, "block range too large") == 5_000
    assert span.refused(8_000, "block range too large") == 4_000
    assert span.refused(9_000, "block range too large") == 4_000  # a stale, wider query
    assert span.size(100) == 100
    assert LogRange(2_000).size(10_000) == 2_000


def test_a_batch_cap_takes_the_providers_number_else_halves() -> None:
    cap = BatchCap()
    assert cap.refused(50, "batch size too large: at most 10 requests per batch") == 10
    assert cap.refused(10, "batch requests are not supported") == 5
    assert cap.refused(1, "batch requests are not supported") == 1
    with pytest.raises(ValueError):
        BatchCap(0)


def test_a_batch_refusal_is_one_error_or_the_same_error_for_every_call() -> None:
    whole = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "too big"}}
    assert refusal(whole, 3) == whole["error"]
    each = [{"id": i, "error": {"code": -32600, "message": "batch too large"}} for i in range(3)]
    assert refusal(each, 3) is not None
    reverts = [{"id": i, "error": {"code": 3, "message": "execution reverted"}} for i in range(3)]
    assert refusal(reverts, 3) is None
    assert refusal([{"id": 0, "result": "0x1"}, *each[1:]], 3) is None


def test_retry_after_in_seconds_or_as_a_date() -> None:
    assert retry_after_seconds("3") == 3.0
    assert retry_after_seconds(None) == 0.0
    assert retry_after_seconds("soon") == 0.0
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 28.0 <= retry_after_seconds(later) <= 30.0
    assert retry_after_seconds(email.utils.formatdate(time.time() - 30, usegmt=True)) == 0.0


def test_unserved_methods_and_tags() -> None:
    assert is_unserved(-32601, "whatever")
    assert is_unserved(-32000, "the method eth_feeHistory does not exist/is not available")
    assert is_unserved(-32602, 'invalid block tag "finalized": unknown block')
    assert not is_unserved(3, "execution reverted")
    assert not is_unserved(-32000, "header not found")


def test_the_log_range_setting() -> None:
    urls = ["http://127.0.0.1:8545"]
    assert ChainSettings(chain_id=80002, rpc_urls=urls).rpc_max_log_range_blocks is None
    chain = ChainSettings(chain_id=80002, rpc_urls=urls, rpc_max_log_range_blocks=2_000)
    assert chain.rpc_max_log_range_blocks == 2_000
    with pytest.raises(ValidationError):
        ChainSettings(chain_id=80002, rpc_urls=urls, rpc_max_log_range_blocks=0)
