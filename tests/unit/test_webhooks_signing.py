"""Standard Webhooks signatures, verification and the retry schedules (pure)."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from entryway.domain.tasks import ExponentialBackoff, RetrySchedule
from entryway.domain.webhooks import (
    DELIVERY_SCHEDULE,
    SUBSCRIBABLE_EVENTS,
    EventType,
    InvalidEndpointError,
    WebhookVerificationError,
    check_endpoint_url,
    new_secret,
    parse_event_types,
    sign,
    verify_webhook,
    webhook_headers,
)

# The published Standard Webhooks test vector: a receiver's off-the-shelf library checks this.
VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
VECTOR_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
VECTOR_TIMESTAMP = 1614265330
VECTOR_BODY = b'{"test": 2432232314}'
VECTOR_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

secrets_ = st.binary(min_size=24, max_size=64).map(
    lambda key: "whsec_" + base64.b64encode(key).decode()
)
ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_", min_size=1, max_size=40)
stamps = st.integers(min_value=0, max_value=2**40)


def test_the_published_vector_signs_and_verifies() -> None:
    assert sign(VECTOR_SECRET, VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY) == VECTOR_SIGNATURE
    headers = {
        "Webhook-Id": VECTOR_ID,
        "Webhook-Timestamp": str(VECTOR_TIMESTAMP),
        "Webhook-Signature": VECTOR_SIGNATURE,
    }
    assert verify_webhook(VECTOR_BODY, headers, VECTOR_SECRET, now=VECTOR_TIMESTAMP) == {
        "test": 2432232314
    }


def test_new_secrets_are_prefixed_random_keys() -> None:
    one, two = new_secret(), new_secret()
    assert one.startswith("whsec_") and one != two
    assert len(base64.b64decode(one.removeprefix("whsec_"))) == 32


@given(secrets_, ids, stamps, st.binary(max_size=300))
def test_what_is_signed_verifies(secret: str, msg_id: str, stamp: int, raw: bytes) -> None:
    data = base64.b64encode(raw).decode()
    body = b'{"data": "' + data.encode() + b'"}'
    headers = webhook_headers([secret], msg_id, stamp, body)
    assert verify_webhook(body, headers, secret, now=stamp + 299) == {"data": data}


@given(secrets_, secrets_, ids, stamps)
def test_a_rotation_signs_with_both_and_either_verifies(
    new: str, old: str, msg_id: str, stamp: int
) -> None:
    body = b'{"type": "userop.included"}'
    headers = webhook_headers([new, old], msg_id, stamp, body)
    signatures = headers["webhook-signature"].split(" ")
    assert len(signatures) == 2 and all(s.startswith("v1,") for s in signatures)
    for secret in (new, old):
        verify_webhook(body, headers, secret, now=stamp)
    verify_webhook(body, headers, [new_secret(), old], now=stamp)


@given(secrets_, secrets_, ids, stamps, st.binary(min_size=1, max_size=50))
def test_a_wrong_secret_or_a_changed_body_fails(
    secret: str, other: str, msg_id: str, stamp: int, extra: bytes
) -> None:
    body = b'{"a": 1}'
    headers = webhook_headers([secret], msg_id, stamp, body)
    if other != secret:
        with pytest.raises(WebhookVerificationError):
            verify_webhook(body, headers, other, now=stamp)
    with pytest.raises(WebhookVerificationError):
        verify_webhook(body + extra, headers, secret, now=stamp)
    with pytest.raises(WebhookVerificationError):
        verify_webhook(body, {**headers, "webhook-id": msg_id + "x"}, secret, now=stamp)


@given(secrets_, stamps, st.integers(min_value=301, max_value=10**6))
def test_stale_or_future_timestamps_fail(secret: str, stamp: int, skew: int) -> None:
    headers = webhook_headers([secret], "msg_1", stamp, b"{}")
    for now in (stamp + skew, stamp - skew):
        with pytest.raises(WebhookVerificationError, match="tolerance"):
            verify_webhook(b"{}", headers, secret, now=now)


def test_malformed_headers_fail() -> None:
    headers = webhook_headers([VECTOR_SECRET], "msg_1", 10, b"{}")
    for broken in (
        {k: v for k, v in headers.items() if k != "webhook-signature"},
        {**headers, "webhook-timestamp": "soon"},
        {**headers, "webhook-signature": headers["webhook-signature"].replace("v1,", "v2,")},
    ):
        with pytest.raises(WebhookVerificationError):
            verify_webhook(b"{}", broken, VECTOR_SECRET, now=10)


@given(st.integers(min_value=1, max_value=20), st.floats(min_value=0, max_value=0.999999))
def test_delivery_delays_follow_the_schedule_within_the_jitter(attempt: int, unit: float) -> None:
    nominal = DELIVERY_SCHEDULE.delays[min(attempt, len(DELIVERY_SCHEDULE.delays)) - 1]
    delay = DELIVERY_SCHEDULE.delay_after(attempt, unit)
    assert nominal * 0.8 <= delay <= nominal * 1.2


def test_the_delivery_schedule_is_the_documented_one() -> None:
    assert DELIVERY_SCHEDULE.delays == (5, 300, 1800, 7200, 18000, 36000, 36000)
    assert DELIVERY_SCHEDULE.max_attempts == 8
    assert RetrySchedule(()).delay_after(3, 0.5) == 0.0


@given(st.integers(min_value=1, max_value=200), st.floats(min_value=0, max_value=0.999999))
def test_task_backoff_grows_exponentially_up_to_the_cap(attempt: int, unit: float) -> None:
    backoff = ExponentialBackoff(base=2.0, factor=2.0, cap=3600.0, jitter=0.2)
    nominal = min(3600.0, 2.0 * 2.0 ** (attempt - 1))
    assert nominal * 0.8 <= backoff.delay_after(attempt, unit) <= nominal * 1.2
    assert backoff.delay_after(attempt + 1, 0.5) >= backoff.delay_after(attempt, 0.5)


def test_endpoints_take_known_events_and_http_urls_only() -> None:
    assert parse_event_types(["credits.low", "credits.low"]) == {EventType.CREDITS_LOW}
    assert EventType.WEBHOOK_TEST not in SUBSCRIBABLE_EVENTS
    assert parse_event_types(["userop.dropped", "account.deployed"]) == {
        EventType.USEROP_DROPPED,
        EventType.ACCOUNT_DEPLOYED,
    }
    for bad in ([], ["userop.included", "nope"], ["webhook.test"]):
        with pytest.raises(InvalidEndpointError):
            parse_event_types(bad)
    assert check_endpoint_url("https://example.org/hook?x=1")
    for bad_url in ("ftp://example.org", "example.org/hook", "http:///nohost", "https://a b"):
        with pytest.raises(InvalidEndpointError):
            check_endpoint_url(bad_url)
