"""Webhook signing secrets at rest: sealed in `webhook_endpoints.secret` and `previous_secret`
(entryway.storage.secret_box), opened only to sign a delivery.

What is sealed is the secret's 32 key bytes, bound to the endpoint's id; a sealed value is 92
characters, within the columns' 100.

Rows written before secrets were sealed hold `whsec_…` in clear. They keep working (opening a
value in clear returns it as it is), and `seal_stored_secrets`, run when the service starts,
seals them, so a database from an older version is converted on its first start with no
migration and no downtime. The same pass re-seals values sealed under a previous key (a key
rotation), and it is where a wrong key shows: it fails before any request is signed.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from entryway.domain.webhooks import SigningSecrets, secret_key, secret_of
from entryway.storage.schema import webhook_endpoints
from entryway.storage.secret_box import SecretBox, SecretsKeyError
from entryway.storage.secrets_key import PREVIOUS_KEYS_ENV
from entryway.storage.tasks import as_utc

_COLUMNS = ("secret", "previous_secret")


def _context(endpoint_id: str) -> str:
    return f"webhook-secret:{endpoint_id}"


def seal_secret(box: SecretBox, endpoint_id: str, secret: str) -> str:
    return box.seal(secret_key(secret), _context(endpoint_id))


def open_secret(box: SecretBox, endpoint_id: str, stored: str) -> str:
    """The `whsec_` secret a column holds, sealed or (written by an older version) in clear."""
    if not SecretBox.is_sealed(stored):
        return stored
    return secret_of(box.open(stored, _context(endpoint_id)))


def signing_secrets(box: SecretBox, row: Any) -> SigningSecrets:
    """The secrets of a `webhook_endpoints` row, opened."""
    previous = row.previous_secret
    expires = row.previous_secret_expires_at
    return SigningSecrets(
        current=open_secret(box, row.endpoint_id, row.secret),
        previous=open_secret(box, row.endpoint_id, previous) if previous else None,
        previous_expires_at=as_utc(expires) if expires else None,
    )


def require_box(box: SecretBox | None) -> SecretBox:
    if box is None:
        raise SecretsKeyError("no secrets key is configured: webhook secrets cannot be stored")
    return box


async def seal_stored_secrets(engine: AsyncEngine, box: SecretBox) -> int:
    """Check that every stored secret opens under the box's keys (else SecretsKeyError), and
    seal anew, under the current key, each one in clear or under a previous key. Returns how
    many rows changed. Several processes may run it at once: a row is replaced only while it
    still holds what was read."""
    changed = 0
    async with engine.begin() as db:
        rows = (
            await db.execute(
                select(
                    webhook_endpoints.c.endpoint_id,
                    webhook_endpoints.c.secret,
                    webhook_endpoints.c.previous_secret,
                )
            )
        ).all()
        for row in rows:
            values = {}
            for column in _COLUMNS:
                stored = getattr(row, column)
                if stored is None:
                    continue
                try:
                    secret = open_secret(box, row.endpoint_id, stored)
                except SecretsKeyError as exc:
                    raise SecretsKeyError(
                        f"the stored webhook signing secrets do not open: {exc}. Configure the "
                        f"key they were sealed with (a replaced one goes in {PREVIOUS_KEYS_ENV})"
                    ) from None
                if not box.is_current(stored):
                    values[column] = seal_secret(box, row.endpoint_id, secret)
            if not values:
                continue
            result = await db.execute(
                update(webhook_endpoints)
                .where(
                    webhook_endpoints.c.endpoint_id == row.endpoint_id,
                    webhook_endpoints.c.secret == row.secret,
                    webhook_endpoints.c.previous_secret.is_not_distinct_from(row.previous_secret),
                )
                .values(**values)
            )
            changed += result.rowcount
    return changed
