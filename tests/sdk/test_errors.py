"""The service's answers, as problem+json and JSON-RPC errors, become the SDK's typed
exceptions; retries follow the policy. The service and the node are httpx.MockTransport."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from entryway_sdk import (
    ApiError,
    ChainNotRecognisedError,
    Entryway,
    EntrywayError,
    InvalidApiKeyError,
    NetworkConnectionError,
    NetworkMismatchError,
    NotFoundError,
    PlanNetworkNotAllowedError,
    RateLimitedError,
    RetryPolicy,
    SponsorshipRefusedError,
    UserOperationRejectedError,
    ValidationError,
)
from entryway_sdk.errors import JsonRpcError

from tests.sdk.fakes import API, NODE, Fake, init, problem, rpc_error

CHECKS = [
    {"check": "the chain ID is enabled for the project", "passed": True},
    {"check": "the API key has access to that network", "passed": False},
    {"check": "the Account Abstraction module is enabled", "passed": True},
]


async def test_init_reads_the_defaults_and_keeps_unknown_fields(
    http: httpx.AsyncClient, fake: Fake
) -> None:
    client = await init(http)
    assert client.defaults.account_factory == "0x17E2dAA961B4C19D0a2655CBf0092AeF73398B76"
    assert client.defaults.min_priority_fee_per_gas == 25 * 10**9
    assert client.defaults.raw["somethingNew"] == 1
    assert fake.seen == ["node", "/get-sdk-defaults"]
    await client.aclose()
    assert not http.is_closed  # given by the caller: left open


async def test_an_rpc_of_another_chain_is_a_network_mismatch(
    http: httpx.AsyncClient, fake: Fake
) -> None:
    fake.chain_id = 84532
    with pytest.raises(NetworkMismatchError) as caught:
        await init(http)
    error = caught.value
    assert isinstance(error, NetworkConnectionError)
    assert (error.expected_chain_id, error.actual_chain_id) == (80002, 84532)
    assert "84532" in str(error) and "80002" in str(error)
    assert "/get-sdk-defaults" not in fake.seen  # checked before asking the service


async def test_an_rpc_that_does_not_answer_is_a_network_connection_problem() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    async with httpx.AsyncClient(transport=httpx.MockTransport(refuse)) as http:
        with pytest.raises(NetworkConnectionError) as caught:
            await init(http)
    assert caught.value.failed_checks[0].name == "the RPC endpoint is reachable and responds"


@pytest.mark.parametrize(
    ("answer", "kind"),
    [
        (problem(401, "invalid_api_key"), InvalidApiKeyError),
        (problem(403, "chain_not_recognised", checks=CHECKS), ChainNotRecognisedError),
        (problem(403, "plan_network_not_allowed"), PlanNetworkNotAllowedError),
        (problem(503, "network_connection_problem", checks=CHECKS), NetworkConnectionError),
        (
            problem(422, "validation_error", errors=[{"location": "q", "message": "x"}]),
            ValidationError,
        ),
        (problem(429, "rate_limited"), RateLimitedError),
        (problem(409, "webhook_endpoint_disabled"), ApiError),
        (httpx.Response(502, text="<html>bad gateway</html>"), ApiError),
    ],
)
async def test_problems_become_typed_errors(
    http: httpx.AsyncClient, fake: Fake, answer: httpx.Response, kind: type[ApiError]
) -> None:
    fake.routes["/get-sdk-defaults"] = lambda _: answer
    with pytest.raises(kind) as caught:
        await init(http)
    error = caught.value
    assert type(error) is kind and isinstance(error, EntrywayError)
    assert error.status == answer.status_code
    if answer.headers.get("content-type") == "application/problem+json":
        assert error.code == answer.json()["code"] and error.detail.startswith("detail of")
    if kind is ChainNotRecognisedError:
        assert isinstance(error, ChainNotRecognisedError)
        assert [c.name for c in error.failed_checks] == ["the API key has access to that network"]
        assert len(error.checks) == 3
    if kind is ValidationError:
        assert isinstance(error, ValidationError) and error.errors[0]["location"] == "q"


async def test_reads_are_retried_after_a_429_and_succeed(
    http: httpx.AsyncClient, fake: Fake
) -> None:
    client = await init(http)
    done = httpx.Response(200, json={"id": "t1", "state": "succeeded", "attempts": 1})
    answers = iter([problem(429, "rate_limited"), problem(429, "rate_limited"), done])
    fake.routes["/task-status"] = lambda _: next(answers)
    task = await client.task_status("t1")
    assert task.state == "succeeded" and fake.seen.count("/task-status") == 3
    await client.aclose()


async def test_retry_after_is_read_and_no_retry_raises_at_once(
    http: httpx.AsyncClient, fake: Fake
) -> None:
    client = await init(http, RetryPolicy(attempts=1))
    fake.routes["/v1/credits"] = lambda _: httpx.Response(
        429, json={"code": "rate_limited", "detail": "slow down"}, headers={"Retry-After": "2"}
    )
    with pytest.raises(RateLimitedError) as caught:
        await client.credits()
    assert caught.value.retry_after == 2.0 and fake.seen.count("/v1/credits") == 1
    await client.aclose()


async def test_not_found_codes_are_not_found(http: httpx.AsyncClient, fake: Fake) -> None:
    client = await init(http)
    fake.routes["/op-status"] = lambda _: problem(404, "op_not_found")
    with pytest.raises(NotFoundError, match="op_not_found"):
        await client.op_status("0x" + "ab" * 32)
    with pytest.raises(NotFoundError):
        await client.task_status("nope")  # the fake's default: 404 not_found
    await client.aclose()


async def test_json_rpc_errors_on_user_operations(http: httpx.AsyncClient, fake: Fake) -> None:
    client = await init(http)
    routes = fake.routes
    routes["eth_sendUserOperation"] = lambda _: rpc_error(-32507, "Invalid UserOp signature")
    routes["pm_getPaymasterData"] = lambda _: rpc_error(
        -32501, "sponsorship refused (spend_cap): over", {"rule": "spend_cap", "policyId": "p1"}
    )
    routes["eth_estimateUserOperationGas"] = lambda _: rpc_error(
        -32521, "UserOperation execution reverted", {"revertData": "0xdeadbeef"}
    )
    routes["eth_supportedEntryPoints"] = lambda _: rpc_error(-32601, "method not found")

    with pytest.raises(UserOperationRejectedError) as rejected:
        await client.rpc("eth_sendUserOperation", [{}])
    assert rejected.value.rpc_code == -32507 and not isinstance(
        rejected.value, SponsorshipRefusedError
    )
    with pytest.raises(SponsorshipRefusedError) as refused:
        await client.rpc("pm_getPaymasterData", [])
    assert (refused.value.rule, refused.value.policy_id) == ("spend_cap", "p1")
    with pytest.raises(UserOperationRejectedError) as reverted:
        await client.rpc("eth_estimateUserOperationGas", [])
    assert reverted.value.revert_data == bytes.fromhex("deadbeef")
    with pytest.raises(JsonRpcError) as other:
        await client.rpc("eth_supportedEntryPoints")
    assert type(other.value) is JsonRpcError and other.value.rpc_code == -32601
    await client.aclose()


async def test_a_problem_on_the_rpc_endpoint_is_typed_and_sends_are_never_retried(
    http: httpx.AsyncClient,
    fake: Fake,
) -> None:
    client = await init(http)
    fake.routes["eth_sendUserOperation"] = lambda _: problem(503, "network_connection_problem")
    fake.routes["eth_getUserOperationReceipt"] = fake.routes["eth_sendUserOperation"]
    with pytest.raises(NetworkConnectionError):
        await client.rpc("eth_sendUserOperation", [{}])
    assert fake.seen.count("eth_sendUserOperation") == 1
    with pytest.raises(NetworkConnectionError):
        await client.rpc("eth_getUserOperationReceipt", ["0x" + "00" * 32])
    assert fake.seen.count("eth_getUserOperationReceipt") == 3  # a read: retried
    await client.aclose()


async def test_bad_arguments_fail_before_any_request(http: httpx.AsyncClient, fake: Fake) -> None:
    bad: Any
    for bad in (0, -1, "80002", True):
        with pytest.raises(ValueError, match="chain_id"):
            await Entryway.init(
                api_key="ew_test_key",
                rpc_url=NODE,
                chain_id=bad,
                base_url=API,
                http=http,
            )
    assert fake.seen == []


async def test_a_json_rpc_error_under_a_503_says_what_happened_after_the_retries(
    http: httpx.AsyncClient, fake: Fake
) -> None:
    """The service's node stopped answering after its network check passed."""
    client = await init(http)
    unreachable = {"code": -32603, "message": "the chain's node is unreachable; try again shortly"}
    fake.routes["eth_getUserOperationReceipt"] = lambda _: httpx.Response(
        503,
        json={"jsonrpc": "2.0", "id": 1, "error": unreachable},
        headers={"Retry-After": "0"},
    )
    with pytest.raises(ApiError) as raised:
        await client.rpc("eth_getUserOperationReceipt", ["0x" + "00" * 32])
    assert raised.value.status == 503
    assert "the chain's node is unreachable" in str(raised.value)
    assert fake.seen.count("eth_getUserOperationReceipt") == 3  # a read: retried
    await client.aclose()


async def test_any_call_refused_for_a_rate_limit_is_sent_again_after_its_retry_after(
    http: httpx.AsyncClient, fake: Fake
) -> None:
    """Nothing of a call refused with -32005 ran: even pm_getPaymasterData (which holds
    credits) and eth_sendUserOperation are sent again, after the service's Retry-After."""
    client = await init(http)
    limited = rpc_error(-32005, "limit exceeded: heavy calls")
    limited.headers["Retry-After"] = "0"
    done = httpx.Response(200, json={"jsonrpc": "2.0", "id": 1, "result": "0x" + "ab" * 32})
    answers = iter([limited, limited, done])
    fake.routes["eth_sendUserOperation"] = lambda _: next(answers)
    assert await client.rpc("eth_sendUserOperation", []) == "0x" + "ab" * 32
    assert fake.seen.count("eth_sendUserOperation") == 3
    # Still refused after the policy's attempts: the JSON-RPC error, with its Retry-After.
    fake.routes["pm_getPaymasterData"] = lambda _: rpc_error(-32005, "limit exceeded")
    with pytest.raises(JsonRpcError) as caught:
        await client.rpc("pm_getPaymasterData", [])
    assert caught.value.rpc_code == -32005 and fake.seen.count("pm_getPaymasterData") == 3
    # Any other refusal of a call that is not a read is final at once.
    fake.routes["eth_sendUserOperation"] = lambda _: rpc_error(-32507, "Invalid signature")
    with pytest.raises(JsonRpcError):
        await client.rpc("eth_sendUserOperation", [])
    assert fake.seen.count("eth_sendUserOperation") == 4
    await client.aclose()
