"""Secrets at rest (webhook signing secrets), sealed with AES-256-GCM under the operator's key.

A sealed value is text that fits the columns secrets always lived in:

    v1:<key id>:<base64url of nonce (12 bytes) ‖ ciphertext ‖ tag (16 bytes)>

- `v1` names this format, so a later one can be told apart.
- The key id (8 hex digits of a SHA-256 of the key) says which key sealed it: after a key
  rotation the box opens values under the previous keys it was given, and a wrong key is an
  error naming both ids instead of an authentication failure deep inside a delivery.
- The nonce is random per value (96 bits: no reuse in any realistic number of secrets).
- The caller binds each value to its place (`context`, e.g. the endpoint's id) as associated
  data, so a value copied into another row does not open there.

The key itself never appears in a message, a repr or a log line.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import secrets
from collections.abc import Iterable

from Crypto.Cipher import AES

from entryway.errors import ConfigurationError

VERSION = "v1"
KEY_BYTES = 32
NONCE_BYTES = 12
TAG_BYTES = 16


class SecretsKeyError(ConfigurationError):
    """The secrets key is missing, malformed, or not the one stored secrets were sealed with."""


def key_id(key: bytes) -> str:
    return hashlib.sha256(b"entryway secrets key id\x00" + key).hexdigest()[:8]


def parse_key(text: str, source: str) -> bytes:
    """A key as the operator writes it: 32 bytes in standard base64. `source` names where it
    came from in the error, never the value."""
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise SecretsKeyError(f"{source} is not base64") from None
    if len(key) != KEY_BYTES:
        raise SecretsKeyError(f"{source} must be {KEY_BYTES} bytes in base64, not {len(key)}")
    return key


def new_key_text() -> str:
    return base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode()


class SecretBox:
    def __init__(self, key: bytes, previous: Iterable[bytes] = ()) -> None:
        keys = [*previous, key]
        if any(len(k) != KEY_BYTES for k in keys):
            raise SecretsKeyError(f"a secrets key is {KEY_BYTES} bytes")
        self.key_id = key_id(key)
        self._keys = {key_id(k): k for k in keys}

    @classmethod
    def generate(cls) -> SecretBox:
        return cls(secrets.token_bytes(KEY_BYTES))

    def __repr__(self) -> str:
        return f"SecretBox(key_id={self.key_id!r})"

    @staticmethod
    def is_sealed(stored: str) -> bool:
        return stored.startswith(f"{VERSION}:")

    def is_current(self, stored: str) -> bool:
        """Sealed under this box's current key (else: in clear, or under a previous key)."""
        return self.is_sealed(stored) and stored.split(":", 2)[1] == self.key_id

    def seal(self, plaintext: bytes, context: str) -> str:
        nonce = secrets.token_bytes(NONCE_BYTES)
        cipher = AES.new(self._keys[self.key_id], AES.MODE_GCM, nonce=nonce, mac_len=TAG_BYTES)
        cipher.update(context.encode())
        body, tag = cipher.encrypt_and_digest(plaintext)
        packed = base64.urlsafe_b64encode(nonce + body + tag).decode().rstrip("=")
        return f"{VERSION}:{self.key_id}:{packed}"

    def open(self, stored: str, context: str) -> bytes:
        version, _, rest = stored.partition(":")
        sealed_by, _, packed = rest.partition(":")
        if version != VERSION or not packed:
            raise SecretsKeyError(f"not a sealed secret of format {VERSION}")
        key = self._keys.get(sealed_by)
        if key is None:
            raise SecretsKeyError(
                f"a stored secret was sealed with key {sealed_by}, which is neither the "
                f"configured secrets key ({self.key_id}) nor a previous key given with it"
            )
        try:
            raw = base64.urlsafe_b64decode(packed + "=" * (-len(packed) % 4))
        except (binascii.Error, ValueError):
            raise SecretsKeyError("a stored secret is not valid base64") from None
        nonce, body, tag = raw[:NONCE_BYTES], raw[NONCE_BYTES:-TAG_BYTES], raw[-TAG_BYTES:]
        cipher = AES.new(key, AES.MODE_GCM, nonce=nonce, mac_len=TAG_BYTES)
        cipher.update(context.encode())
        try:
            return cipher.decrypt_and_verify(body, tag)
        except ValueError:
            raise SecretsKeyError(
                f"a stored secret sealed with key {sealed_by} does not authenticate: it was "
                "altered, or moved from another row"
            ) from None
