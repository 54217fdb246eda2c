"""`verify_webhook` accepts what the service signs (Standard Webhooks) and nothing else."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable

import pytest
from entryway_sdk import WebhookVerificationError, verify_webhook
from entryway_sdk.webhooks import sign_webhook

from entryway.domain.webhooks import new_secret, webhook_headers

BODY = json.dumps({"type": "userop.included", "data": {"success": True}}).encode()
NOW = 1_790_000_000
Change = Callable[[dict[str, str], bytes], tuple[dict[str, str], bytes]]


def signed(secrets: list[str], body: bytes = BODY, stamp: int = NOW) -> dict[str, str]:
    return webhook_headers(secrets, "msg_2abc", stamp, body)


def test_a_delivery_signed_by_the_service_verifies() -> None:
    secret = new_secret()
    event = verify_webhook(secret, signed([secret]), BODY, now=NOW + 10)
    assert event == {"type": "userop.included", "data": {"success": True}}
    # header names are case-insensitive; the body may come as text
    upper = {k.title(): v for k, v in signed([secret]).items()}
    assert verify_webhook(secret, upper, BODY.decode(), now=NOW) == event


def test_the_standard_webhooks_example_vector() -> None:
    """The example in the Standard Webhooks specification."""
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    body = b'{"test": 2432232314}'
    headers = {
        "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
        "webhook-timestamp": "1614265330",
        "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
    }
    assert verify_webhook(secret, headers, body, now=1614265330) == {"test": 2432232314}
    assert (
        sign_webhook(secret, headers["webhook-id"], 1614265330, body)
        == (headers["webhook-signature"])
    )


def test_during_a_rotation_either_secret_verifies() -> None:
    old, new = new_secret(), new_secret()
    headers = signed([new, old])
    assert " " in headers["webhook-signature"]
    assert verify_webhook(old, headers, BODY, now=NOW)
    assert verify_webhook(new, headers, BODY, now=NOW)
    # the receiver may hold both secrets too, and only the old one may have signed
    assert verify_webhook([new, old], signed([old]), BODY, now=NOW)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda h, b: (h, b + b" "), "no signature matches"),  # body changed in transit
        (lambda h, b: ({**h, "webhook-id": "msg_other"}, b), "no signature matches"),
        (lambda h, b: ({**h, "webhook-timestamp": str(NOW - 301)}, b), "too old"),
        (lambda h, b: ({**h, "webhook-timestamp": str(NOW + 301)}, b), "in the future"),
        (lambda h, b: ({**h, "webhook-timestamp": "soon"}, b), "not an integer"),
        (lambda h, b: ({k: v for k, v in h.items() if k != "webhook-id"}, b), "webhook-id"),
        (
            lambda h, b: ({**h, "webhook-signature": "v2," + h["webhook-signature"][3:]}, b),
            "no signature matches",
        ),
        (lambda h, b: ({**h, "webhook-signature": ""}, b), "no signature matches"),
    ],
)
def test_anything_else_is_refused(change: Change, why: str) -> None:
    secret = new_secret()
    headers, body = change(signed([secret]), BODY)
    with pytest.raises(WebhookVerificationError, match=why):
        verify_webhook(secret, headers, body, now=NOW)


def test_a_wrong_secret_or_a_malformed_one_is_refused() -> None:
    headers = signed([new_secret()])
    with pytest.raises(WebhookVerificationError, match="no signature"):
        verify_webhook(new_secret(), headers, BODY, now=NOW)
    with pytest.raises(WebhookVerificationError, match="whsec_"):
        verify_webhook("whsec_not base64!", headers, BODY, now=NOW)


def test_the_default_clock_and_tolerance() -> None:
    secret = "whsec_" + base64.b64encode(b"k" * 24).decode()
    now = int(time.time())
    assert verify_webhook(secret, signed([secret], stamp=now - 60), BODY) is not None
    with pytest.raises(WebhookVerificationError):
        verify_webhook(secret, signed([secret], stamp=now - 600), BODY)
    assert verify_webhook(secret, signed([secret], stamp=now - 600), BODY, tolerance=900)
