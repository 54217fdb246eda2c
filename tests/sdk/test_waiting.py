"""`op.wait()`: the receipt once the op is mined, a clear error when the bundler dropped it or
the wait runs out, and the charged credits when the service reports them."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from entryway_sdk import UserOperationDroppedError, UserOperationTimeoutError

from tests.sdk.fakes import Fake, init

HASH = "0x" + "ab" * 32
TX = "0x" + "cd" * 32
RECEIPT = {
    "userOpHash": HASH,
    "entryPoint": "0x4337084D9E255Ff0702461CF8895CE9E3b5Ff108",
    "sender": "0x" + "11" * 20,
    "nonce": "0x0",
    "paymaster": "0xD0cF9e6DB79Cb594E04D1c82319cfCDE99B31C85",
    "actualGasCost": hex(7 * 10**15),
    "actualGasUsed": hex(267_922),
    "success": True,
    "reason": "0x",
    "logs": [],
    "receipt": {"transactionHash": TX, "blockNumber": "0x7"},
}


def result(value: Any) -> httpx.Response:
    return httpx.Response(200, json={"jsonrpc": "2.0", "id": 1, "result": value})


def statuses(*names: str) -> Any:
    """Answers entryway_getUserOperationStatus with `names` in turn, then the last forever."""
    seen = list(names)

    def answer(_: httpx.Request) -> httpx.Response:
        name = seen.pop(0) if len(seen) > 1 else seen[0]
        body = {"status": name} | ({"reason": "expired"} if name == "dropped" else {})
        return result(body)

    return answer


async def test_wait_returns_the_receipt_once_included(http: httpx.AsyncClient, fake: Fake) -> None:
    fake.routes["entryway_getUserOperationStatus"] = statuses("pending", "submitted", "included")
    fake.routes["eth_getUserOperationReceipt"] = lambda _: result(RECEIPT)
    fake.routes["/op-status"] = lambda _: httpx.Response(
        200, json={"chainId": 80002, "userOpHash": HASH, "status": "included"}
    )
    client = await init(http)
    receipt = await client.user_operation(HASH).wait(timeout=5, poll_interval=0.01)
    assert receipt.success and receipt.transaction_hash == TX and receipt.block_number == 7
    assert (receipt.actual_gas_used, receipt.actual_gas_cost) == (267_922, 7 * 10**15)
    assert receipt.reason is None and receipt.credits is None  # not reported (yet)
    assert fake.seen.count("entryway_getUserOperationStatus") == 3


async def test_credits_reported_by_op_status_reach_the_receipt(
    http: httpx.AsyncClient, fake: Fake
) -> None:
    fake.routes["entryway_getUserOperationStatus"] = statuses("included")
    fake.routes["eth_getUserOperationReceipt"] = lambda _: result(RECEIPT)
    fake.routes["/op-status"] = lambda _: httpx.Response(
        200, json={"chainId": 80002, "userOpHash": HASH, "status": "included", "credits": 2521}
    )
    client = await init(http)
    receipt = await client.user_operation(HASH).wait(timeout=5, poll_interval=0.01)
    assert receipt.credits == 2521


async def test_a_dropped_op_raises_with_the_reason(http: httpx.AsyncClient, fake: Fake) -> None:
    fake.routes["entryway_getUserOperationStatus"] = statuses("pending", "dropped")
    client = await init(http)
    with pytest.raises(UserOperationDroppedError, match="expired") as caught:
        await client.user_operation(HASH).wait(timeout=5, poll_interval=0.01)
    assert caught.value.reason == "expired" and caught.value.user_op_hash == HASH


async def test_a_wait_runs_out(http: httpx.AsyncClient, fake: Fake) -> None:
    fake.routes["entryway_getUserOperationStatus"] = statuses("pending")
    client = await init(http)
    with pytest.raises(UserOperationTimeoutError, match="last status: pending") as caught:
        await client.user_operation(HASH).wait(timeout=0.05, poll_interval=0.01)
    assert isinstance(caught.value, TimeoutError)


async def test_an_op_the_bundler_forgot_is_found_on_chain(
    http: httpx.AsyncClient, fake: Fake
) -> None:
    fake.routes["entryway_getUserOperationStatus"] = statuses("not_found")
    fake.routes["eth_getUserOperationReceipt"] = lambda _: result(RECEIPT | {"success": False})
    client = await init(http)
    receipt = await client.user_operation(HASH).wait(timeout=5, poll_interval=0.01)
    assert receipt.success is False


async def test_an_op_whose_block_left_the_chain_raises_dropped(
    http: httpx.AsyncClient, fake: Fake
) -> None:
    """Reported mined, its receipt gone (a reorg), then dropped: the wait asks again rather
    than trusting the first answer, and raises with the service's reason, not a timeout."""
    answers = [{"status": "submitted"}, {"status": "included", "transactionHash": TX}]
    gone = {"status": "dropped", "reason": "its block left the chain"}
    fake.routes["entryway_getUserOperationStatus"] = lambda _: result(
        answers.pop(0) if answers else gone
    )
    fake.routes["eth_getUserOperationReceipt"] = lambda _: result(None)
    client = await init(http)
    with pytest.raises(UserOperationDroppedError, match="its block left the chain") as caught:
        await client.user_operation(HASH).wait(timeout=30, poll_interval=0.01)
    assert caught.value.reason == "its block left the chain"
    assert caught.value.user_op_hash == HASH
