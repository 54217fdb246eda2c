"""Webhooks, pure: the event catalogue, Standard Webhooks signatures and their verification,
and the delivery retry schedule. No I/O, no framework, so the SDK can carry `verify_webhook`
as it is.

Signing (https://www.standardwebhooks.com): every request carries `webhook-id` (the event's
id, the same on every retry), `webhook-timestamp` (Unix seconds of this attempt) and
`webhook-signature`: space-separated `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, one
per valid secret, so that during a secret rotation a receiver holding either secret accepts
the request. A secret reads `whsec_<base64 of the key bytes>`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from entryway.domain.destinations import (
    PUBLIC_ONLY,
    DestinationNotAllowedError,
    DestinationPolicy,
    InvalidDestinationError,
    check_destination,
)
from entryway.domain.tasks import RetrySchedule
from entryway.errors import EntrywayError

SECRET_PREFIX = "whsec_"  # noqa: S105 - the format's prefix, not a secret
SECRET_BYTES = 32
SIGNATURE_VERSION = "v1"
DEFAULT_TOLERANCE_SECONDS = 300  # the Standard Webhooks recommendation against replays

# After a failed attempt: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (±20 %): eight attempts over
# about 27 hours, the schedule the Standard Webhooks reference implementations use.
DELIVERY_SCHEDULE = RetrySchedule((5, 300, 1_800, 7_200, 18_000, 36_000, 36_000), jitter=0.2)
DELIVERY_TIMEOUT_SECONDS = 15.0


class EventType(StrEnum):
    USEROP_INCLUDED = "userop.included"
    USEROP_FAILED = "userop.failed"
    USEROP_DROPPED = "userop.dropped"
    USEROP_REORGED = "userop.reorged"  # a reorg removed the block it was mined in
    ACCOUNT_DEPLOYED = "account.deployed"
    RECOVERY_STARTED = "recovery.started"
    RECOVERY_FINALIZED = "recovery.finalized"
    RECOVERY_CANCELLED = "recovery.cancelled"
    NOTARIZATION_ANCHORED = "notarization.anchored"
    NOTARIZATION_REANCHORED = "notarization.reanchored"  # anchored again after a reorg
    CREDITS_LOW = "credits.low"
    CREDITS_OVERAGE = "credits.overage"
    CREDITS_BUDGET = "credits.budget"  # the overage reached the alert share of the budget
    PAYMASTER_DEPOSIT_LOW = "paymaster.deposit_low"
    WEBHOOK_TEST = "webhook.test"  # sent on request to one endpoint, never subscribed to


SUBSCRIBABLE_EVENTS: frozenset[EventType] = frozenset(EventType) - {EventType.WEBHOOK_TEST}
MAX_URL_LENGTH = 2_000


class DisabledReason(StrEnum):
    MANUAL = "manual"  # the project turned it off
    GONE = "gone"  # the receiver answered 410 Gone
    FAILING = "failing"  # a delivery failed every attempt of the schedule


class DeliveryState(StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"
    SKIPPED = "skipped"  # the endpoint was disabled or deleted before the attempt


class AttemptOutcome(StrEnum):
    IN_FLIGHT = "in_flight"
    SUCCEEDED = "succeeded"  # a 2xx answer
    FAILED = "failed"  # another status, a timeout or a connection error
    GONE = "gone"  # 410: the endpoint is disabled
    INTERRUPTED = "interrupted"  # the worker died during the attempt
    REFUSED = "refused"  # the destination is not allowed: nothing was sent


class WebhookError(EntrywayError):
    pass


class WebhookVerificationError(WebhookError):
    """The request is not a genuine, fresh webhook from the holder of the secret."""


class InvalidEndpointError(WebhookError):
    """An endpoint's URL or event types are not acceptable."""


class EndpointNotAllowedError(InvalidEndpointError):
    """The URL is well formed but the service may not send to it (a private address, a
    loopback name, credentials in the URL): entryway.domain.destinations."""


class EndpointDisabledError(WebhookError):
    pass


class DeliveryInProgressError(WebhookError):
    """A replay was asked for while the delivery still has attempts under way."""


@dataclass(frozen=True, slots=True)
class WebhookEndpoint:
    """An endpoint as listed and changed; its signing secrets travel apart (SigningSecrets),
    read only where a request is signed or a new secret is shown."""

    endpoint_id: str
    project_id: str
    url: str
    description: str
    event_types: frozenset[EventType]
    enabled: bool
    disabled_reason: DisabledReason | None
    disabled_at: datetime | None
    failure_streak: int  # failed attempts since the last success
    created_at: datetime
    updated_at: datetime
    previous_secret_expires_at: datetime | None

    def receives(self, event_type: EventType) -> bool:
        return self.enabled and event_type in self.event_types


@dataclass(frozen=True, slots=True)
class SigningSecrets:
    current: str = field(repr=False)
    previous: str | None = field(default=None, repr=False)
    previous_expires_at: datetime | None = None

    def valid_at(self, at: datetime) -> tuple[str, ...]:
        """The current secret and, until its overlap ends, the one it replaced."""
        expires = self.previous_expires_at
        if self.previous and expires is not None and at < expires:
            return (self.current, self.previous)
        return (self.current,)


@dataclass(frozen=True, slots=True)
class RevealedEndpoint:
    """An endpoint with the secret just made for it (creation, rotation): shown once."""

    endpoint: WebhookEndpoint
    secret: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class DeliveryAttempt:
    attempt_id: str
    number: int  # 1-based, across replays
    started_at: datetime
    finished_at: datetime | None
    duration_ms: int | None
    status_code: int | None
    error: str | None
    outcome: AttemptOutcome


@dataclass(frozen=True, slots=True)
class Delivery:
    """One event on its way to one endpoint."""

    delivery_id: str
    event_id: str
    event_type: str
    endpoint_id: str
    project_id: str
    state: DeliveryState
    attempts: int
    replays: int
    task_id: str | None
    created_at: datetime
    delivered_at: datetime | None
    log: tuple[DeliveryAttempt, ...] = ()


class EventPublisher(Protocol):
    """What the rest of the service emits events through (entryway.storage.webhooks.WebhookStore
    implements it): fans the event out to the project's subscribed endpoints, durably."""

    async def emit(
        self,
        event_type: EventType,
        project_id: str,
        data: Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
    ) -> object: ...


def parse_event_types(values: Iterable[str]) -> frozenset[EventType]:
    """The event types an endpoint subscribes to: at least one, all from the catalogue."""
    chosen = set(values)
    unknown = sorted(v for v in chosen if v not in {e.value for e in SUBSCRIBABLE_EVENTS})
    if unknown:
        raise InvalidEndpointError(f"unknown event types: {', '.join(unknown)}")
    if not chosen:
        raise InvalidEndpointError("subscribe to at least one event type")
    return frozenset(EventType(v) for v in chosen)


def check_endpoint_url(url: str, policy: DestinationPolicy = PUBLIC_ONLY) -> str:
    """An absolute http(s) URL, at most MAX_URL_LENGTH long, that `policy` lets the service
    send to (by default: a public destination; see entryway.domain.destinations)."""
    if len(url) > MAX_URL_LENGTH:
        raise InvalidEndpointError("the URL is too long")
    try:
        check_destination(url, policy)
    except InvalidDestinationError as exc:
        raise InvalidEndpointError(str(exc)) from None
    except DestinationNotAllowedError as exc:
        raise EndpointNotAllowedError(str(exc)) from None
    return url


def event_envelope(event_type: EventType, data: Mapping[str, Any], at: datetime) -> dict[str, Any]:
    """The body every endpoint receives, as the Standard Webhooks payload structure has it."""
    stamp = at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return {"type": event_type.value, "timestamp": stamp, "data": dict(data)}


def new_secret() -> str:
    return secret_of(secrets.token_bytes(SECRET_BYTES))


def secret_of(key: bytes) -> str:
    """The `whsec_` text of a secret's key bytes."""
    return SECRET_PREFIX + base64.b64encode(key).decode()


def secret_key(secret: str) -> bytes:
    """The key bytes of a `whsec_` secret."""
    try:
        return base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except binascii.Error:
        raise WebhookVerificationError("the secret is not whsec_ followed by base64") from None


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """One signature, `v1,<base64>`."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_key(secret), signed, hashlib.sha256).digest()
    return f"{SIGNATURE_VERSION},{base64.b64encode(digest).decode()}"


def webhook_headers(
    secrets_: Sequence[str], message_id: str, timestamp: int, body: bytes
) -> dict[str, str]:
    """The three Standard Webhooks headers, signed with every secret currently valid."""
    if not secrets_:
        raise ValueError("at least one secret signs a webhook")
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(sign(s, message_id, timestamp, body) for s in secrets_),
    }


def verify_webhook(
    body: bytes | str,
    headers: Mapping[str, str],
    secret: str | Sequence[str],
    *,
    now: int,
    tolerance: int = DEFAULT_TOLERANCE_SECONDS,
) -> Any:
    """The parsed JSON body if one `v1` signature in the headers matches one of the secrets and
    the timestamp is within `tolerance` seconds of `now` (Unix seconds); otherwise
    WebhookVerificationError. Give the raw body as received: re-serialised JSON will not match.
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        message_id = lowered["webhook-id"]
        timestamp_text = lowered["webhook-timestamp"]
        signatures = lowered["webhook-signature"]
    except KeyError as missing:
        raise WebhookVerificationError(f"missing header {missing.args[0]}") from None
    try:
        timestamp = int(timestamp_text)
    except ValueError:
        raise WebhookVerificationError("webhook-timestamp is not an integer") from None
    if abs(now - timestamp) > tolerance:
        raise WebhookVerificationError("webhook-timestamp is outside the tolerance")
    raw = body.encode() if isinstance(body, str) else body
    candidates = [secret] if isinstance(secret, str) else list(secret)
    expected = {sign(s, message_id, timestamp, raw) for s in candidates}
    presented = [p for p in signatures.split(" ") if p.startswith(f"{SIGNATURE_VERSION},")]
    if not any(hmac.compare_digest(p, e) for p in presented for e in expected):
        raise WebhookVerificationError("no matching signature")
    return json.loads(raw)
