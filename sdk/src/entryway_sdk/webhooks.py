"""Verifying Entryway's webhooks (Standard Webhooks): `webhook-id`, `webhook-timestamp` and
`webhook-signature` = space-separated `v1,<base64 HMAC-SHA256("<id>.<timestamp>.<body>")>`,
keyed with the base64 part of the endpoint's secret `whsec_<base64>`."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from entryway_sdk.errors import WebhookVerificationError

DEFAULT_TOLERANCE_SECONDS = 300
_SECRET_PREFIX = "whsec_"  # noqa: S105 - a prefix, not a secret


def _key(secret: str) -> bytes:
    try:
        return base64.b64decode(secret.removeprefix(_SECRET_PREFIX), validate=True)
    except binascii.Error:
        raise WebhookVerificationError("the secret is not whsec_<base64>") from None


def sign_webhook(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """`v1,<base64 signature>` of one message (for tests of a receiver)."""
    mac = hmac.new(_key(secret), f"{message_id}.{timestamp}.".encode() + body, hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode()


def verify_webhook(
    secret: str | Sequence[str],
    headers: Mapping[str, str],
    body: bytes | str,
    *,
    tolerance: int = DEFAULT_TOLERANCE_SECONDS,
    now: float | None = None,
) -> Any:
    """The parsed JSON body if one `v1` signature in `headers` matches one of the secrets
    (give several during a rotation) and `webhook-timestamp` lies within `tolerance` seconds
    of `now` (default: the clock); WebhookVerificationError otherwise.

    Pass the raw body exactly as received: re-serialised JSON will not match. Deduplicate on
    `webhook-id`: a delivery can arrive more than once."""
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        message_id = lowered["webhook-id"]
        stamp_text = lowered["webhook-timestamp"]
        presented = lowered["webhook-signature"].split(" ")
    except KeyError as missing:
        raise WebhookVerificationError(f"missing header {missing.args[0]}") from None
    try:
        stamp = int(stamp_text)
    except ValueError:
        raise WebhookVerificationError("webhook-timestamp is not an integer") from None
    current = time.time() if now is None else now
    if abs(current - stamp) > tolerance:
        raise WebhookVerificationError("webhook-timestamp is too old or in the future")
    raw = body.encode() if isinstance(body, str) else bytes(body)
    secrets = [secret] if isinstance(secret, str) else list(secret)
    expected = [sign_webhook(s, message_id, stamp, raw) for s in secrets]
    if not any(
        hmac.compare_digest(p.encode(), e.encode())
        for p in presented
        if p.startswith("v1,")
        for e in expected
    ):
        raise WebhookVerificationError("no signature matches")
    try:
        return json.loads(raw)
    except ValueError:
        raise WebhookVerificationError("the body is not JSON") from None
