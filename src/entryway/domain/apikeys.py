"""API keys: high-entropy secrets with a readable prefix, stored only as a hash. Pure.

A key reads `ew_<env>_<id>_<secret>`: `env` is `test` or `live`; `id` (8 hex characters) is the
public handle a dashboard shows and the store indexes; `secret` is 32 random bytes in URL-safe
base64. Only SHA-256 of the whole key is kept: a leaked database gives no usable key, and
lookups stay O(1) through the id. SHA-256 (not a slow password hash) is right here because
the secret is 256 random bits, not a human choice.

A key has a role. A `service` key uses the service (JSON-RPC, wallets, notarizations, status
reads, its project's credits and usage): it is the key handed to apps, so a leaked one cannot
change the project. An `admin` key can do that too and also administers the project (its
settings, plan, keys, webhook endpoints and sponsorship policies).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from enum import StrEnum

from entryway.errors import EntrywayError

_KEY = re.compile(r"^ew_(test|live)_([0-9a-f]{8})_([A-Za-z0-9_-]{43})$")


class KeyEnvironment(StrEnum):
    TEST = "test"
    LIVE = "live"


class KeyRole(StrEnum):
    SERVICE = "service"
    ADMIN = "admin"


class InvalidApiKeyError(EntrywayError):
    pass


@dataclass(frozen=True, slots=True)
class IssuedKey:
    """What creating a key returns: the secret, shown once, and what may be stored."""

    secret: str
    key_id: str
    environment: KeyEnvironment
    digest: str

    @property
    def display(self) -> str:
        return f"ew_{self.environment.value}_{self.key_id}_…"


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def issue(environment: KeyEnvironment) -> IssuedKey:
    key_id = secrets.token_hex(4)
    secret = f"ew_{environment.value}_{key_id}_{secrets.token_urlsafe(32)}"
    return IssuedKey(secret, key_id, environment, digest(secret))


@dataclass(frozen=True, slots=True)
class PresentedKey:
    key_id: str
    environment: KeyEnvironment
    digest: str

    def matches(self, stored_digest: str) -> bool:
        return hmac.compare_digest(self.digest, stored_digest)


def parse(presented: str) -> PresentedKey:
    """Check a presented key's shape (no store needed) and derive its lookup id and digest."""
    match = _KEY.match(presented.strip())
    if match is None:
        raise InvalidApiKeyError("the API key is malformed")
    env, key_id, _ = match.groups()
    return PresentedKey(key_id, KeyEnvironment(env), digest(presented.strip()))
